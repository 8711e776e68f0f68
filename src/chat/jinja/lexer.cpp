#include "chat/jinja/lexer.h"

#include <cstdlib>

#include "chat/jinja/unicode.h"
#include "common/error.h"

namespace specula::jinja {

std::string describe_position(const std::string& source, size_t offset) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < offset && i < source.size(); ++i) {
        if (source[i] == '\n') {
            ++line;
            col = 1;
        } else if ((static_cast<unsigned char>(source[i]) & 0xc0) != 0x80) {
            ++col;
        }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

namespace {

// Text with, for each byte, its offset in the original template.
struct Mapped {
    std::string s;
    std::vector<size_t> at;
    void add(const Mapped& from, size_t i) {
        s += from.s[i];
        at.push_back(from.at[i]);
    }
};

bool line_start(const std::string& s, size_t i) {
    if (i == 0) return true;
    const char p = s[i - 1];
    if (p == '\n' || p == '\r') return true;
    // U+2028 / U+2029 end a line for JavaScript's multiline ^
    return i >= 3 && static_cast<unsigned char>(s[i - 3]) == 0xe2 &&
           static_cast<unsigned char>(s[i - 2]) == 0x80 &&
           (static_cast<unsigned char>(p) == 0xa8 || static_cast<unsigned char>(p) == 0xa9);
}

// Matches {%-? \s* (end)?generation \s* -?%} at i; sets the end, and whether - was on each side.
bool match_generation(const std::string& s, size_t i, size_t* end, bool* lstrip, bool* rstrip) {
    if (s.compare(i, 2, "{%") != 0) return false;
    size_t p = i + 2;
    *lstrip = p < s.size() && s[p] == '-';
    if (*lstrip) ++p;
    while (size_t n = whitespace_len(s, p)) p += n;
    if (s.compare(p, 3, "end") == 0 && s.compare(p + 3, 10, "generation") == 0) p += 3;
    if (s.compare(p, 10, "generation") != 0) return false;
    p += 10;
    while (size_t n = whitespace_len(s, p)) p += n;
    *rstrip = p < s.size() && s[p] == '-';
    if (*rstrip) ++p;
    if (s.compare(p, 2, "%}") != 0) return false;
    *end = p + 2;
    return true;
}

Mapped preprocess(const std::string& source) {
    Mapped a;
    a.s = source;
    for (size_t i = 0; i < source.size(); ++i) a.at.push_back(i);
    if (!a.s.empty() && a.s.back() == '\n') {
        a.s.pop_back();
        a.at.pop_back();
    }
    // lstrip_blocks: spaces and tabs that open a line before {# {% {- go
    Mapped b;
    for (size_t i = 0; i < a.s.size();) {
        if (line_start(a.s, i)) {
            size_t j = i;
            while (j < a.s.size() && (a.s[j] == ' ' || a.s[j] == '\t')) ++j;
            if (j > i && j + 1 < a.s.size() && a.s[j] == '{' &&
                (a.s[j + 1] == '#' || a.s[j + 1] == '%' || a.s[j + 1] == '-')) {
                i = j;
                continue;
            }
        }
        b.add(a, i++);
    }
    // trim_blocks: the newline right after %} #} -} goes
    Mapped c;
    for (size_t i = 0; i < b.s.size(); ++i) {
        c.add(b, i);
        if (b.s[i] == '}' && i > 0 &&
            (b.s[i - 1] == '#' || b.s[i - 1] == '%' || b.s[i - 1] == '-') && i + 1 < b.s.size() &&
            b.s[i + 1] == '\n' && c.s.size() >= 2)
            ++i;
    }
    // {% generation %} / {% endgeneration %} are removed, their whitespace control applied
    Mapped d;
    size_t last = 0;
    for (size_t i = 0; i < c.s.size(); ++i) {
        size_t end = 0;
        bool lstrip = false, rstrip = false;
        if (c.s[i] != '{' || !match_generation(c.s, i, &end, &lstrip, &rstrip)) continue;
        size_t cut = i;
        while (lstrip && cut > last && whitespace_len_before(c.s, cut))
            cut -= whitespace_len_before(c.s, cut);
        for (size_t k = last; k < cut; ++k) d.add(c, k);
        size_t after = end;
        while (size_t n = whitespace_len(c.s, after)) after += n;
        if (!rstrip)
            for (size_t k = end; k < after; ++k) d.add(c, k);
        last = after;
        i = after - 1;
    }
    for (size_t k = last; k < c.s.size(); ++k) d.add(c, k);
    return d;
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// Operators and punctuation, the longer of two that share a start first.
struct Rule {
    const char* seq;
    Tok type;
};

constexpr char kFloorDivide[] = "//";  // named: line-based tools take it for a comment

const Rule kRules[] = {
    {"{%", Tok::OpenStatement},  {"%}", Tok::CloseStatement},
    {"{{", Tok::OpenExpression}, {"}}", Tok::CloseExpression},
    {"(", Tok::OpenParen},       {")", Tok::CloseParen},
    {"{", Tok::OpenBrace},       {"}", Tok::CloseBrace},
    {"[", Tok::OpenBracket},     {"]", Tok::CloseBracket},
    {",", Tok::Comma},           {".", Tok::Dot},
    {":", Tok::Colon},           {"|", Tok::Pipe},
    {"<=", Tok::Comparison},     {">=", Tok::Comparison},
    {"==", Tok::Comparison},     {"!=", Tok::Comparison},
    {"<", Tok::Comparison},      {">", Tok::Comparison},
    {"+", Tok::Additive},        {"-", Tok::Additive},
    {"~", Tok::Additive},        {"**", Tok::Power},
    {"*", Tok::Multiplicative},  {kFloorDivide, Tok::Multiplicative},
    {"/", Tok::Multiplicative},  {"%", Tok::Multiplicative},
    {"=", Tok::Equals},
};

class Lexer {
  public:
    explicit Lexer(const std::string& source) : source_(source), m_(preprocess(source)), s_(m_.s) {}

    std::vector<Token> run() {
        while (pos_ < s_.size()) step();
        return std::move(tokens_);
    }

  private:
    const std::string& source_;
    Mapped m_;
    const std::string& s_;
    size_t pos_ = 0;
    int brace_depth_ = 0;
    std::vector<Token> tokens_;

    [[noreturn]] void error(const std::string& what, size_t at) const {
        const size_t off = at < m_.at.size() ? m_.at[at] : source_.size();
        fail("chat template: ", describe_position(source_, off), ": ", what);
    }

    void push(Tok t, std::string v, size_t at) {
        tokens_.push_back({t, std::move(v), at < m_.at.size() ? m_.at[at] : source_.size()});
    }

    void strip_trailing_whitespace() {
        if (!tokens_.empty() && tokens_.back().type == Tok::Text) {
            tokens_.back().value = trim_end(tokens_.back().value);
            if (tokens_.back().value.empty()) tokens_.pop_back();
        }
    }

    void skip_whitespace() {
        while (size_t n = whitespace_len(s_, pos_)) pos_ += n;
    }

    // JavaScript's consumeWhile: running off the end of the input is an error.
    void skip_whitespace_strict() {
        while (size_t n = whitespace_len(s_, pos_)) {
            pos_ += n;
            if (pos_ >= s_.size()) error("unexpected end of input", pos_);
        }
    }

    std::string digits() {
        const size_t start = pos_;
        while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
        if (pos_ >= s_.size() && pos_ > start) error("unexpected end of input", pos_);
        return s_.substr(start, pos_ - start);
    }

    std::string string_literal(char quote) {
        const size_t open = pos_ - 1;
        std::string out;
        while (true) {
            if (pos_ >= s_.size()) error("unterminated string literal", open);
            const char c = s_[pos_];
            if (c == quote) break;
            ++pos_;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) error("unterminated string literal", open);
            const char e = s_[pos_++];
            switch (e) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'v':
                    out += '\v';
                    break;
                case '\'':
                    out += '\'';
                    break;
                case '"':
                    out += '"';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case 'x':
                case 'u': {
                    const size_t n = e == 'x' ? 2 : 4;
                    unsigned cp = 0;
                    for (size_t k = 0; k < n; ++k) {
                        const char h = pos_ + k < s_.size() ? s_[pos_ + k] : 'g';
                        const int d = is_digit(h)              ? h - '0'
                                      : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                                      : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                               : -1;
                        if (d < 0)
                            error(std::string("invalid hexadecimal escape \\") + e, pos_ - 2);
                        cp = cp * 16 + unsigned(d);
                    }
                    pos_ += n;
                    if (cp >= 0xd800 && cp < 0xdc00 && s_.compare(pos_, 2, "\\u") == 0) {
                        // a surrogate pair written as two escapes is one character
                        const unsigned low =
                            unsigned(std::strtoul(s_.substr(pos_ + 2, 4).c_str(), nullptr, 16));
                        if (low >= 0xdc00 && low < 0xe000 && s_.size() >= pos_ + 6) {
                            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                            pos_ += 6;
                        }
                    }
                    // a lone surrogate reaches UTF-8 output as U+FFFD, as from JavaScript
                    append_utf8(out, cp >= 0xd800 && cp < 0xe000 ? 0xfffd : cp);
                    break;
                }
                default:
                    error(std::string("unexpected escaped character: ") + e, pos_ - 1);
            }
        }
        ++pos_;  // the closing quote
        return out;
    }

    // {% raw %} ... {% endraw %}: the body is text. Returns false when not at a raw tag.
    bool raw_block(size_t at) {
        size_t p = at + 2;
        const bool lstrip = p < s_.size() && s_[p] == '-';
        if (lstrip) ++p;
        while (size_t n = whitespace_len(s_, p)) p += n;
        if (s_.compare(p, 3, "raw") != 0 || (p + 3 < s_.size() && is_word_char(s_[p + 3])))
            return false;
        p += 3;
        while (size_t n = whitespace_len(s_, p)) p += n;
        const bool rstrip = p < s_.size() && s_[p] == '-';
        if (rstrip) ++p;
        if (s_.compare(p, 2, "%}") != 0) return false;
        p += 2;
        for (size_t q = s_.find("{%", p); q != std::string::npos; q = s_.find("{%", q + 2)) {
            size_t r = q + 2;
            const bool end_lstrip = r < s_.size() && s_[r] == '-';
            if (end_lstrip) ++r;
            while (size_t n = whitespace_len(s_, r)) r += n;
            if (s_.compare(r, 6, "endraw") != 0) continue;
            r += 6;
            while (size_t n = whitespace_len(s_, r)) r += n;
            const bool end_rstrip = r < s_.size() && s_[r] == '-';
            if (end_rstrip) ++r;
            if (s_.compare(r, 2, "%}") != 0) continue;
            if (lstrip) strip_trailing_whitespace();
            std::string body = s_.substr(p, q - p);
            if (rstrip) body = trim_start(body);
            if (end_lstrip) body = trim_end(body);
            if (!body.empty()) push(Tok::Text, body, p);
            push(Tok::Comment, "raw", at);  // ends the text run like any tag
            pos_ = r + 2;
            if (end_rstrip) skip_whitespace();
            return true;
        }
        error("missing {% endraw %}", at);
    }

    // Text up to the next tag, right after a tag (or at the start); false when there is none.
    bool text() {
        size_t end = pos_;
        while (true) {
            end = s_.find('{', end);
            if (end == std::string::npos) {
                end = s_.size();
                break;
            }
            const char next = end + 1 < s_.size() ? s_[end + 1] : 0;
            if (next == '%' || next == '{' || next == '#') break;
            ++end;
        }
        if (end == pos_) return false;
        push(Tok::Text, s_.substr(pos_, end - pos_), pos_);
        pos_ = end;
        return true;
    }

    // At a '{': a comment, a raw block, or an opening tag that strips the whitespace before it
    // ("{%-", "{{-"); false when it is none of them.
    bool open_tag(bool after_text_or_tag) {
        const char next = pos_ + 1 < s_.size() ? s_[pos_ + 1] : 0;
        if (next == '#') {
            const size_t open = pos_;
            pos_ += 2;
            const bool strip_before = pos_ < s_.size() && s_[pos_] == '-';
            if (strip_before) ++pos_;
            const size_t end = s_.find("#}", pos_);
            if (end == std::string::npos) error("missing end of comment tag", open);
            std::string comment = s_.substr(pos_, end - pos_);
            const bool strip_after = !comment.empty() && comment.back() == '-';
            if (strip_before) strip_trailing_whitespace();
            push(Tok::Comment, std::move(comment), open);
            pos_ = end + 2;
            if (strip_after) skip_whitespace();
            return true;
        }
        if (next == '%' && after_text_or_tag && raw_block(pos_)) return true;
        if (pos_ + 2 >= s_.size() || s_[pos_ + 2] != '-' || (next != '%' && next != '{'))
            return false;
        strip_trailing_whitespace();
        push(next == '%' ? Tok::OpenStatement : Tok::OpenExpression, next == '%' ? "{%" : "{{",
             pos_);
        if (next == '{') brace_depth_ = 0;
        pos_ += 3;
        return true;
    }

    // A sign: a signed number, or a unary operator, where an operand is expected (not after an
    // identifier, a literal or a closing bracket); false elsewhere.
    bool signed_number(char c, Tok last) {
        if (tokens_.empty() || last == Tok::Text)
            error(std::string("unexpected character: ") + c, pos_);
        if (last == Tok::Ident || last == Tok::Number || last == Tok::String ||
            last == Tok::CloseParen || last == Tok::CloseBracket)
            return false;
        const size_t at = pos_++;
        std::string num = digits();
        if (!num.empty() && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
            ++pos_;
            num += '.';
            num += digits();
        }
        const Tok type = num.empty() ? Tok::Unary : Tok::Number;
        num.insert(num.begin(), c);
        push(type, std::move(num), at);
        return true;
    }

    // An operator or punctuation of kRules; false when none starts here.
    bool rule(char c) {
        for (const Rule& r : kRules) {
            if (r.seq[0] != c) continue;
            if (r.type == Tok::CloseExpression && brace_depth_ > 0) continue;
            if (s_.compare(pos_, std::char_traits<char>::length(r.seq), r.seq) != 0) continue;
            push(r.type, r.seq, pos_);
            if (r.type == Tok::OpenExpression)
                brace_depth_ = 0;
            else if (r.type == Tok::OpenBrace)
                ++brace_depth_;
            else if (r.type == Tok::CloseBrace)
                --brace_depth_;
            pos_ += std::char_traits<char>::length(r.seq);
            return true;
        }
        return false;
    }

    // One token (or text run) from pos_.
    void step() {
        const Tok last = tokens_.empty() ? Tok::Text : tokens_.back().type;
        const bool after_tag = tokens_.empty() || last == Tok::CloseStatement ||
                               last == Tok::CloseExpression || last == Tok::Comment;
        if (after_tag && text()) return;
        if (s_[pos_] == '{' && open_tag(after_tag || last == Tok::Text)) return;
        skip_whitespace_strict();
        const char c = s_[pos_];
        if (c == '-' && pos_ + 2 < s_.size() && s_[pos_ + 2] == '}') {
            const char next = s_[pos_ + 1];
            if (next == '%' || next == '}') {
                push(next == '%' ? Tok::CloseStatement : Tok::CloseExpression,
                     next == '%' ? "%}" : "}}", pos_);
                pos_ += 3;
                skip_whitespace();
                return;
            }
        }
        if ((c == '-' || c == '+') && signed_number(c, last)) return;
        if (rule(c)) return;
        if (c == '\'' || c == '"') {
            const size_t at = pos_++;
            push(Tok::String, string_literal(c), at);
            return;
        }
        if (is_digit(c)) {
            const size_t at = pos_;
            std::string num = digits();
            if (last != Tok::Dot && pos_ + 1 < s_.size() && s_[pos_] == '.' &&
                is_digit(s_[pos_ + 1])) {
                ++pos_;
                num += '.';
                num += digits();
            }
            push(Tok::Number, num, at);
            return;
        }
        if (is_word_char(c)) {
            const size_t at = pos_;
            while (pos_ < s_.size() && is_word_char(s_[pos_])) ++pos_;
            if (pos_ >= s_.size()) error("unexpected end of input", pos_);
            push(Tok::Ident, s_.substr(at, pos_ - at), at);
            return;
        }
        error(std::string("unexpected character: ") + c, pos_);
    }
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
    return Lexer(source).run();
}

}  // namespace specula::jinja
