// Tests (`value is name`, `value is not name(arg)`): those of @huggingface/jinja with its
// semantics (boolean, callable, odd, even, true, false, none, string, number, integer, iterable
// (a list or a string), mapping, sequence, lower, upper, defined, undefined, equalto/eq), plus
// Jinja2's float, divisibleby, ne, lt/le/gt/ge and their symbols, in, sameas and escaped.
#include <cmath>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/unicode.h"

namespace specula::jinja {

namespace {

const char* const kTests[] = {
    "boolean",     "callable", "odd",       "even",        "false",   "true",     "none",
    "string",      "number",   "integer",   "iterable",    "mapping", "sequence", "lower",
    "upper",       "defined",  "undefined", "equalto",     "eq",      "==",       "float",
    "divisibleby", "ne",       "!=",        "lt",          "<",       "lessthan", "le",
    "<=",          "gt",       ">",         "greaterthan", "ge",      ">=",       "in",
    "sameas",      "escaped"};

}  // namespace

bool Interpreter::has_test(const std::string& name) const {
    for (const char* t : kTests)
        if (name == t) return true;
    return false;
}

bool Interpreter::apply_test(const std::string& name, const Value& x,
                             const std::vector<Value>& args) {
    if (!has_test(name)) error("unknown test: " + name);
    const Value other = args.empty() ? Value::undefined() : args[0];
    if (name == "boolean") return x.kind == Kind::Bool;
    if (name == "callable") return x.kind == Kind::Function;
    if (name == "odd" || name == "even") {
        if (x.kind != Kind::Int) error("cannot " + name + " on " + x.type_name());
        const bool odd = std::fmod(x.num, 2) != 0;
        return name == "odd" ? odd : !odd;
    }
    if (name == "false") return x.kind == Kind::Bool && !x.boolean;
    if (name == "true") return x.kind == Kind::Bool && x.boolean;
    if (name == "none") return x.is_null();
    if (name == "string") return x.kind == Kind::String;
    if (name == "number") return x.is_number();
    if (name == "integer") return x.kind == Kind::Int;
    if (name == "float") return x.kind == Kind::Float;
    if (name == "iterable")  // as the reference: a tuple is not
        return (x.kind == Kind::Array && !x.tuple) || x.kind == Kind::String;
    if (name == "mapping") return x.kind == Kind::Object;
    if (name == "sequence")
        return x.kind == Kind::Array || x.kind == Kind::Object || x.kind == Kind::String;
    if (name == "lower") return x.kind == Kind::String && x.str == to_lower(x.str);
    if (name == "upper") return x.kind == Kind::String && x.str == to_upper(x.str);
    if (name == "defined") return !x.is_undefined();
    if (name == "undefined") return x.is_undefined();
    if (name == "escaped") return false;
    if (name == "equalto" || name == "eq" || name == "==" || name == "sameas")
        return strict_equal(x, other);
    if (name == "ne" || name == "!=") return !strict_equal(x, other);
    if (name == "divisibleby") {
        if (!x.is_number() || !other.is_number() || other.num == 0)
            error("divisibleby needs two numbers, the divisor not 0");
        return std::fmod(x.num, other.num) == 0;
    }
    if (name == "in") {
        if (other.kind == Kind::Array) {
            for (const Value& v : *other.arr)
                if (strict_equal(v, x)) return true;
            return false;
        }
        if (other.kind == Kind::String && x.kind == Kind::String)
            return other.str.find(x.str) != std::string::npos;
        if (other.kind == Kind::Object && x.kind == Kind::String)
            return other.obj->find(x.str) != nullptr;
        error(std::string("cannot test 'in' on ") + other.type_name());
    }
    int c;
    try {
        c = compare_values(x, other, true);
    } catch (const std::runtime_error& e) {
        error(e.what());
    }
    if (name == "lt" || name == "<" || name == "lessthan") return c < 0;
    if (name == "le" || name == "<=") return c <= 0;
    if (name == "gt" || name == ">" || name == "greaterthan") return c > 0;
    return c >= 0;  // ge, >=
}

}  // namespace specula::jinja
