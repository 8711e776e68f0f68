// The Jinja lexer: the template text, preprocessed as @huggingface/jinja does (one trailing
// newline dropped, lstrip_blocks and trim_blocks on, generation/endgeneration tags removed), cut
// into tokens. Whitespace control ({%- -%} {{- -}} {#- -#}) is applied here; `{% raw %}` bodies
// become text. Every token keeps its offset in the original text, so errors name line and column.
// Malformed input throws specula::Error ("chat template: line L, column C: ...").
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace specula::jinja {

enum class Tok {
    Text,
    Number,
    String,
    Ident,
    Equals,
    OpenParen,
    CloseParen,
    OpenStatement,
    CloseStatement,
    OpenExpression,
    CloseExpression,
    OpenBracket,
    CloseBracket,
    OpenBrace,
    CloseBrace,
    Comma,
    Dot,
    Colon,
    Pipe,
    Additive,        // + - ~
    Multiplicative,  // * / // %
    Power,           // **
    Comparison,      // < > <= >= == !=
    Unary,           // a sign not followed by digits
    Comment,
};

struct Token {
    Tok type;
    std::string value;
    size_t offset;  // in the original template text
};

// Line and column (1-based) of byte `offset` in `source`.
std::string describe_position(const std::string& source, size_t offset);

std::vector<Token> tokenize(const std::string& source);

}  // namespace specula::jinja
