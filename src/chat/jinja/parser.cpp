#include "chat/jinja/parser.h"

#include <cstdlib>
#include <set>
#include <vector>

#include "chat/jinja/lexer.h"
#include "common/error.h"

namespace specula::jinja {

namespace {

constexpr int kMaxNesting = 96;  // brackets, blocks and operators nested inside one another

class Parser {
  public:
    Parser(const std::string& source, std::vector<Token> tokens)
        : src_(source), t_(std::move(tokens)) {}

    std::vector<AstPtr> run() {
        std::vector<AstPtr> body;
        while (i_ < t_.size()) body.push_back(any());
        return body;
    }

  private:
    const std::string& src_;
    std::vector<Token> t_;
    size_t i_ = 0;
    int depth_ = 0;

    struct Nest {
        Parser& p;
        explicit Nest(Parser& parser) : p(parser) {
            if (++p.depth_ > kMaxNesting) p.error("template nested too deeply");
        }
        ~Nest() { --p.depth_; }
    };

    [[noreturn]] void error(const std::string& what) const {
        const size_t off = i_ < t_.size() ? t_[i_].offset : src_.size();
        fail("chat template: ", describe_position(src_, off), ": ", what);
    }

    size_t here() const { return i_ < t_.size() ? t_[i_].offset : src_.size(); }
    bool is(Tok t, size_t ahead = 0) const {
        return i_ + ahead < t_.size() && t_[i_ + ahead].type == t;
    }
    bool is_ident(const char* name, size_t ahead = 0) const {
        return is(Tok::Ident, ahead) && t_[i_ + ahead].value == name;
    }
    bool is_statement(std::initializer_list<const char*> names) const {
        if (!is(Tok::OpenStatement) || !is(Tok::Ident, 1)) return false;
        for (const char* n : names)
            if (t_[i_ + 1].value == n) return true;
        return false;
    }
    const Token& expect(Tok t, const char* what) {
        if (!is(t)) error(std::string("expected ") + what);
        return t_[i_++];
    }
    void expect_ident(const char* name) {
        if (!is_ident(name)) error(std::string("expected '") + name + "'");
        ++i_;
    }
    static AstPtr node(Node k, size_t offset) {
        auto n = std::make_unique<Ast>();
        n->kind = k;
        n->offset = offset;
        return n;
    }
    // Statements up to one of the {% names %} (not consumed).
    std::vector<AstPtr> block_until(std::initializer_list<const char*> names,
                                    const char* end_name) {
        std::vector<AstPtr> body;
        while (!is_statement(names)) {
            if (i_ >= t_.size())
                error(std::string("unexpected end of template: missing {% ") + end_name + " %}");
            body.push_back(any());
        }
        return body;
    }
    void end_tag(const char* name) {
        expect(Tok::OpenStatement, "{%");
        expect_ident(name);
        expect(Tok::CloseStatement, "%}");
    }

    AstPtr any() {
        Nest nest(*this);
        const Token& tok = t_[i_];
        switch (tok.type) {
            case Tok::Comment: {
                auto n = node(Node::Comment, tok.offset);
                ++i_;
                return n;
            }
            case Tok::Text: {
                auto n = node(Node::Text, tok.offset);
                n->str = tok.value;
                ++i_;
                return n;
            }
            case Tok::OpenStatement:
                return statement();
            case Tok::OpenExpression: {
                ++i_;
                auto e = expression();
                expect(Tok::CloseExpression, "}}");
                return e;
            }
            default:
                error("unexpected token '" + tok.value + "'");
        }
    }

    AstPtr statement() {
        ++i_;  // {%
        if (!is(Tok::Ident)) error("expected a statement name");
        const std::string name = t_[i_].value;
        const size_t at = here();
        ++i_;
        if (name == "set") return set_statement(at);
        if (name == "if") {
            auto n = if_statement(at);
            end_tag("endif");
            return n;
        }
        if (name == "for") {
            auto n = for_statement(at);
            end_tag("endfor");
            return n;
        }
        if (name == "macro") {
            auto n = node(Node::Macro, at);
            if (!is(Tok::Ident)) error("expected a macro name");
            n->str = t_[i_++].value;
            n->list = args(true);
            expect(Tok::CloseStatement, "%}");
            n->body = block_until({"endmacro"}, "endmacro");
            end_tag("endmacro");
            return n;
        }
        if (name == "call") {
            auto n = node(Node::CallBlock, at);
            if (is(Tok::OpenParen)) n->list = args(true);
            if (!is(Tok::Ident)) error("expected a macro name after call");
            auto callee = node(Node::Ident, here());
            callee->str = t_[i_++].value;
            auto call = node(Node::Call, callee->offset);
            call->list = args(false);
            call->a = std::move(callee);
            n->a = std::move(call);
            expect(Tok::CloseStatement, "%}");
            n->body = block_until({"endcall"}, "endcall");
            end_tag("endcall");
            return n;
        }
        if (name == "break" || name == "continue") {
            expect(Tok::CloseStatement, "%}");
            return node(name == "break" ? Node::Break : Node::Continue, at);
        }
        if (name == "filter") {
            auto n = node(Node::FilterBlock, at);
            n->a = filter_call(nullptr);
            expect(Tok::CloseStatement, "%}");
            n->body = block_until({"endfilter"}, "endfilter");
            end_tag("endfilter");
            return n;
        }
        --i_;
        error("unknown statement '" + name + "'");
    }

    AstPtr set_statement(size_t at) {
        auto n = node(Node::Set, at);
        n->a = expression_sequence(false);
        if (is(Tok::Equals)) {
            ++i_;
            n->b = expression_sequence(false);
        } else {
            expect(Tok::CloseStatement, "%}");
            n->body = block_until({"endset"}, "endset");
            expect(Tok::OpenStatement, "{%");
            expect_ident("endset");
        }
        expect(Tok::CloseStatement, "%}");
        return n;
    }

    AstPtr if_statement(size_t at) {
        Nest nest(*this);
        auto n = node(Node::If, at);
        n->a = expression();
        expect(Tok::CloseStatement, "%}");
        n->body = block_until({"elif", "else", "endif"}, "endif");
        if (is_statement({"elif"})) {
            i_ += 2;
            n->alt.push_back(if_statement(here()));
        } else if (is_statement({"else"})) {
            i_ += 2;
            expect(Tok::CloseStatement, "%}");
            n->alt = block_until({"endif"}, "endif");
        }
        return n;
    }

    AstPtr for_statement(size_t at) {
        auto n = node(Node::For, at);
        n->a = expression_sequence(true);
        if (n->a->kind != Node::Ident && n->a->kind != Node::TupleLit)
            error("expected a name or a tuple of names as the loop variable");
        expect_ident("in");
        n->b = expression();
        expect(Tok::CloseStatement, "%}");
        n->body = block_until({"endfor", "else"}, "endfor");
        if (is_statement({"else"})) {
            i_ += 2;
            expect(Tok::CloseStatement, "%}");
            n->alt = block_until({"endfor"}, "endfor");
        }
        return n;
    }

    AstPtr expression_sequence(bool primary_only) {
        const size_t at = here();
        auto first = primary_only ? primary() : expression();
        if (!is(Tok::Comma)) return first;
        auto tuple = node(Node::TupleLit, at);
        tuple->list.push_back(std::move(first));
        while (is(Tok::Comma)) {
            ++i_;
            tuple->list.push_back(primary_only ? primary() : expression());
        }
        return tuple;
    }

    AstPtr expression() {
        Nest nest(*this);
        const size_t at = here();
        auto a = logical_or();
        if (!is_ident("if")) return a;
        ++i_;
        auto test = logical_or();
        if (is_ident("else")) {
            ++i_;
            auto n = node(Node::Ternary, at);
            n->a = std::move(test);
            n->b = std::move(a);
            n->c = expression();
            return n;
        }
        auto n = node(Node::Select, at);
        n->a = std::move(a);
        n->b = std::move(test);
        return n;
    }

    AstPtr binary(std::string op, AstPtr l, AstPtr r, size_t at) {
        auto n = node(Node::Binary, at);
        n->str = std::move(op);
        n->a = std::move(l);
        n->b = std::move(r);
        return n;
    }

    AstPtr logical_or() {
        const size_t at = here();
        auto l = logical_and();
        while (is_ident("or")) {
            ++i_;
            l = binary("or", std::move(l), logical_and(), at);
        }
        return l;
    }

    AstPtr logical_and() {
        const size_t at = here();
        auto l = logical_not();
        while (is_ident("and")) {
            ++i_;
            l = binary("and", std::move(l), logical_not(), at);
        }
        return l;
    }

    AstPtr logical_not() {
        if (!is_ident("not")) return comparison();
        Nest nest(*this);
        auto n = node(Node::Unary, here());
        ++i_;
        n->str = "not";
        n->a = logical_not();
        return n;
    }

    AstPtr comparison() {
        const size_t at = here();
        auto l = additive();
        while (true) {
            std::string op;
            if (is_ident("not") && is_ident("in", 1)) {
                op = "not in";
                i_ += 2;
            } else if (is_ident("in")) {
                op = "in";
                ++i_;
            } else if (is(Tok::Comparison)) {
                op = t_[i_++].value;
            } else {
                break;
            }
            l = binary(op, std::move(l), additive(), at);
        }
        return l;
    }

    AstPtr additive() {
        const size_t at = here();
        auto l = multiplicative();
        while (is(Tok::Additive)) {
            const std::string op = t_[i_++].value;
            l = binary(op, std::move(l), multiplicative(), at);
        }
        return l;
    }

    AstPtr multiplicative() {
        const size_t at = here();
        auto l = power();
        while (is(Tok::Multiplicative)) {
            const std::string op = t_[i_++].value;
            l = binary(op, std::move(l), power(), at);
        }
        return l;
    }

    AstPtr power() {
        const size_t at = here();
        auto l = test();
        while (is(Tok::Power)) {
            ++i_;
            l = binary("**", std::move(l), test(), at);
        }
        return l;
    }

    AstPtr test() {
        auto operand = filter();
        while (is_ident("is")) {
            auto n = node(Node::Test, here());
            ++i_;
            if (is_ident("not")) {
                n->flag = true;
                ++i_;
            }
            if (!is(Tok::Ident)) error("expected the name of a test after 'is'");
            n->str = t_[i_++].value;
            if (is(Tok::OpenParen)) {
                n->list = args(false);
            } else if (is(Tok::Number) || is(Tok::String) || is_ident("true") ||
                       is_ident("false") || is_ident("none") || is_ident("True") ||
                       is_ident("False") || is_ident("None")) {
                n->list.push_back(primary());
            }
            n->a = std::move(operand);
            operand = std::move(n);
        }
        return operand;
    }

    // `name` or `name(args)` after | (or after {% filter ).
    AstPtr filter_call(AstPtr operand) {
        if (!is(Tok::Ident)) error("expected a filter name");
        auto n = node(Node::Filter, here());
        n->str = t_[i_++].value;
        if (is(Tok::OpenParen)) {
            n->flag = true;
            n->list = args(false);
        }
        n->a = std::move(operand);
        return n;
    }

    AstPtr filter() {
        auto operand = unary_sign();
        while (is(Tok::Pipe)) {
            ++i_;
            operand = filter_call(std::move(operand));
        }
        return operand;
    }

    AstPtr unary_sign() {
        if ((is(Tok::Unary) || is(Tok::Additive)) && (t_[i_].value == "-" || t_[i_].value == "+")) {
            Nest nest(*this);
            auto n = node(Node::Unary, here());
            n->str = t_[i_++].value;
            n->a = unary_sign();
            return n;
        }
        return call_member();
    }

    AstPtr call_member() {
        auto e = member(primary());
        while (is(Tok::OpenParen)) {
            auto n = node(Node::Call, e->offset);
            n->list = args(false);
            n->a = std::move(e);
            e = member(std::move(n));
        }
        return e;
    }

    std::vector<AstPtr> args(bool parameters) {
        Nest nest(*this);
        expect(Tok::OpenParen, "(");
        std::vector<AstPtr> out;
        std::set<std::string> names;
        bool saw_keyword = false, saw_spread = false;
        while (!is(Tok::CloseParen)) {
            if (i_ >= t_.size()) error("unexpected end of template in an argument list");
            const bool kw_spread = is(Tok::Power);
            const bool spread = is(Tok::Multiplicative) && t_[i_].value == "*";
            if (parameters && (kw_spread || spread))
                error("argument unpacking in a parameter list");
            if (kw_spread) {
                auto n = node(Node::KwSpread, here());
                ++i_;
                n->a = expression();
                out.push_back(std::move(n));
                if (is(Tok::Comma)) ++i_;
                if (!is(Tok::CloseParen)) error("`**` must be applied to the final argument");
                break;
            }
            AstPtr arg;
            if (spread) {
                if (saw_spread) error("only one `*` argument unpacking is allowed");
                saw_spread = true;
                arg = node(Node::Spread, here());
                ++i_;
                arg->a = expression();
            } else {
                arg = expression();
                if (is(Tok::Equals)) {
                    ++i_;
                    if (arg->kind != Node::Ident) error("expected a name before '='");
                    auto kw = node(Node::KwArg, arg->offset);
                    kw->str = arg->str;
                    kw->a = expression();
                    arg = std::move(kw);
                }
                if (parameters) {
                    if (arg->kind != Node::Ident && arg->kind != Node::KwArg)
                        error("expected a parameter name");
                    if (!names.insert(arg->str).second)
                        error("duplicate parameter name: " + arg->str);
                }
                if (arg->kind == Node::KwArg)
                    saw_keyword = true;
                else if (saw_keyword)
                    error(parameters ? "non-default argument follows default argument"
                                     : "positional argument follows keyword argument");
                else if (saw_spread)
                    error("positional argument follows `*` argument unpacking");
            }
            out.push_back(std::move(arg));
            if (is(Tok::Comma)) ++i_;
        }
        ++i_;  // )
        return out;
    }

    AstPtr subscript() {
        std::vector<AstPtr> parts;
        bool slice = false;
        const size_t at = here();
        while (!is(Tok::CloseBracket)) {
            if (i_ >= t_.size()) error("unexpected end of template in a subscript");
            if (is(Tok::Colon)) {
                parts.push_back(nullptr);
                ++i_;
                slice = true;
            } else {
                parts.push_back(expression());
                if (is(Tok::Colon)) {
                    ++i_;
                    slice = true;
                }
            }
        }
        if (parts.empty()) error("expected an index or a slice");
        if (!slice) return std::move(parts[0]);
        if (parts.size() > 3) error("a slice takes at most three parts");
        auto n = node(Node::Slice, at);
        n->a = std::move(parts[0]);
        if (parts.size() > 1) n->b = std::move(parts[1]);
        if (parts.size() > 2) n->c = std::move(parts[2]);
        return n;
    }

    AstPtr member(AstPtr object) {
        while (is(Tok::Dot) || is(Tok::OpenBracket)) {
            auto n = node(Node::Member, here());
            const bool computed = is(Tok::OpenBracket);
            ++i_;
            if (computed) {
                Nest nest(*this);
                n->b = subscript();
                expect(Tok::CloseBracket, "]");
            } else {
                n->b = primary();
                if (n->b->kind != Node::Ident && n->b->kind != Node::Int)
                    error("expected a name or an integer after '.'");
            }
            n->flag = computed;
            n->a = std::move(object);
            object = std::move(n);
        }
        return object;
    }

    AstPtr primary() {
        if (i_ >= t_.size()) error("unexpected end of template");
        const Token& tok = t_[i_++];
        switch (tok.type) {
            case Tok::Number: {
                const bool is_float = tok.value.find('.') != std::string::npos;
                auto n = node(is_float ? Node::Float : Node::Int, tok.offset);
                n->num = std::strtod(tok.value.c_str(), nullptr);
                return n;
            }
            case Tok::String: {
                auto n = node(Node::String, tok.offset);
                n->str = tok.value;
                while (is(Tok::String)) n->str += t_[i_++].value;
                return n;
            }
            case Tok::Ident: {
                auto n = node(Node::Ident, tok.offset);
                n->str = tok.value;
                return n;
            }
            case Tok::OpenParen: {
                Nest nest(*this);
                auto e = expression_sequence(false);
                expect(Tok::CloseParen, ")");
                return e;
            }
            case Tok::OpenBracket: {
                Nest nest(*this);
                auto n = node(Node::ArrayLit, tok.offset);
                while (!is(Tok::CloseBracket)) {
                    if (i_ >= t_.size()) error("unexpected end of template in a list");
                    n->list.push_back(expression());
                    if (is(Tok::Comma)) ++i_;
                }
                ++i_;
                return n;
            }
            case Tok::OpenBrace: {
                Nest nest(*this);
                auto n = node(Node::ObjectLit, tok.offset);
                while (!is(Tok::CloseBrace)) {
                    if (i_ >= t_.size()) error("unexpected end of template in a dict");
                    auto k = expression();
                    expect(Tok::Colon, ":");
                    n->pairs.emplace_back(std::move(k), expression());
                    if (is(Tok::Comma)) ++i_;
                }
                ++i_;
                return n;
            }
            default:
                --i_;
                error("unexpected '" + tok.value + "'");
        }
    }
};

}  // namespace

std::shared_ptr<const Program> parse(const std::string& source) {
    auto program = std::make_shared<Program>();
    program->source = source;
    program->body = Parser(program->source, tokenize(program->source)).run();
    return program;
}

}  // namespace specula::jinja
