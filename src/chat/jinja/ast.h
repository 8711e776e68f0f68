// The syntax tree of a parsed template: one generic node type whose fields each kind uses as
// listed below. A tree is immutable once parsed, so one parse serves any number of renders.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace specula::jinja {

enum class Node {
    Text,         // str: literal text
    String,       // str
    Int,          // num
    Float,        // num
    Ident,        // str
    ArrayLit,     // list
    TupleLit,     // list
    ObjectLit,    // pairs
    Member,       // a: object, b: property, flag: computed ([...])
    Slice,        // a: start, b: stop, c: step (each may be null)
    Call,         // a: callee, list: arguments
    KwArg,        // str: name, a: value
    Spread,       // a: *value
    KwSpread,     // a: **value
    Binary,       // str: operator, a, b
    Unary,        // str: operator (not, -, +), a
    Filter,       // a: operand, str: filter name, list: arguments (flag: called with parentheses)
    Test,         // a: operand, str: test name, flag: negated, list: arguments
    Ternary,      // a: condition, b: if true, c: if false
    Select,       // a: value, b: condition (`x if c` without else)
    If,           // a: test, body, alt
    For,          // a: loop target, b: iterable, body, alt (else)
    Set,          // a: target, b: value (null for a block set), body
    Macro,        // str: name, list: parameters, body
    CallBlock,    // a: call expression, list: caller parameters, body
    FilterBlock,  // a: a Filter node with a null operand, body
    Break,
    Continue,
    Comment,
};

struct Ast;
using AstPtr = std::unique_ptr<Ast>;

struct Ast {
    Node kind;
    size_t offset = 0;  // in the template source
    std::string str;
    double num = 0;
    bool flag = false;
    AstPtr a, b, c;
    std::vector<AstPtr> list, body, alt;
    std::vector<std::pair<AstPtr, AstPtr>> pairs;
};

struct Program {
    std::string source;
    std::vector<AstPtr> body;
};

}  // namespace specula::jinja
