// The Jinja parser: tokens to a syntax tree with @huggingface/jinja's grammar and operator
// precedence (ternary < or < and < not < comparisons and `in` < + - ~ < * / // % < ** < `is`
// tests < filters < unary signs < calls, attributes, subscripts and slices). Extensions the
// reference lacks: `{% raw %}` (in the lexer) and tests with an argument (`is divisibleby(3)`,
// `is eq 2`). Syntax errors throw specula::Error with line and column; nesting is bounded so a
// hostile template cannot exhaust the stack.
#pragma once

#include <memory>
#include <string>

#include "chat/jinja/ast.h"

namespace specula::jinja {

std::shared_ptr<const Program> parse(const std::string& source);

}  // namespace specula::jinja
