// The pattern parser and code-point ranges of string_pattern.h.
#include "sampling/string_pattern.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "common/error.h"

namespace specula::pattern {

namespace {

constexpr int kMaxGroupDepth = 32;

Ranges normalize(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    for (const auto& [a, b] : r) {
        if (!out.empty() && a <= out.back().second + 1)
            out.back().second = std::max(out.back().second, b);
        else
            out.emplace_back(a, b);
    }
    return out;
}

Ranges complement(const Ranges& r) {
    Ranges out;
    uint32_t next = 0;
    for (const auto& [a, b] : r) {
        if (a > next) out.emplace_back(next, a - 1);
        next = b + 1;
    }
    if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
    return out;
}

const Ranges& digit() {
    static const Ranges r = {{'0', '9'}};
    return r;
}
const Ranges& word() {
    static const Ranges r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    return r;
}
const Ranges& space() {  // ECMAScript WhiteSpace and LineTerminator
    static const Ranges r = normalize({{0x09, 0x0D},
                                       {0x20, 0x20},
                                       {0xA0, 0xA0},
                                       {0x1680, 0x1680},
                                       {0x2000, 0x200A},
                                       {0x2028, 0x2029},
                                       {0x202F, 0x202F},
                                       {0x205F, 0x205F},
                                       {0x3000, 0x3000},
                                       {0xFEFF, 0xFEFF}});
    return r;
}

class Parser {
  public:
    Parser(const std::string& pattern, const std::string& ptr, const char* keyword)
        : p_(pattern), ptr_(ptr), keyword_(keyword) {}

    // Top level: each alternative searched anywhere unless anchored.
    Re parse() {
        Re alt = node(Re::kAlt);
        for (;;) {
            Re seq = node(Re::kCat);
            const bool anchored_start = eat('^');
            Re body = sequence(0);
            const bool anchored_end = eat('$');
            if (!anchored_start) seq.kids.push_back(any_star());
            seq.kids.push_back(std::move(body));
            if (!anchored_end) seq.kids.push_back(any_star());
            alt.kids.push_back(std::move(seq));
            if (i_ == p_.size()) break;
            if (!eat('|')) refuse(p_[i_] == ')' ? "an unbalanced ')'" : "this character");
        }
        return alt;
    }

  private:
    [[noreturn]] void refuse(const std::string& what) const {
        fail("json_schema: '", keyword_, "' at ", ptr_.empty() ? "/" : ptr_, ": ", what,
             " (at offset ", i_, " of \"", p_, "\") is not supported");
    }

    bool eat(char c) {
        if (i_ < p_.size() && p_[i_] == c) {
            ++i_;
            return true;
        }
        return false;
    }

    static Re any_star() {
        Re r = node(Re::kRep);
        r.max = -1;
        r.kids.push_back(klass({{0, kMaxCp}}));
        return r;
    }

    Re alternation(int depth) {
        Re alt = node(Re::kAlt);
        alt.kids.push_back(sequence(depth));
        while (eat('|')) alt.kids.push_back(sequence(depth));
        return alt;
    }

    Re sequence(int depth) {
        Re seq = node(Re::kCat);
        while (i_ < p_.size()) {
            const char c = p_[i_];
            if (c == '|' || c == ')') break;
            if (c == '$' && depth == 0 && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) break;
            Re a = atom(depth);
            quantifier(a);
            seq.kids.push_back(std::move(a));
        }
        return seq;
    }

    void quantifier(Re& a) {
        if (i_ >= p_.size()) return;
        int mn, mx;
        const char c = p_[i_];
        if (c == '*') {
            mn = 0, mx = -1, ++i_;
        } else if (c == '+') {
            mn = 1, mx = -1, ++i_;
        } else if (c == '?') {
            mn = 0, mx = 1, ++i_;
        } else if (c == '{') {
            ++i_;
            mn = number();
            mx = mn;
            if (eat(',')) mx = i_ < p_.size() && p_[i_] == '}' ? -1 : number();
            if (!eat('}')) refuse("a malformed {n,m} quantifier");
            if (mx >= 0 && mx < mn) refuse("a {n,m} quantifier with m < n");
        } else {
            return;
        }
        eat('?');  // lazy: the same language
        if (i_ < p_.size() && std::string_view("*+?{").find(p_[i_]) != std::string_view::npos)
            refuse("a quantifier after a quantifier");
        Re r = node(Re::kRep);
        r.min = mn, r.max = mx;
        r.kids.push_back(std::move(a));
        a = std::move(r);
    }

    int number() {
        int n = 0, digits = 0;
        while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
            n = std::min(n * 10 + (p_[i_++] - '0'), 100000);
            ++digits;
        }
        if (!digits) refuse("a malformed {n,m} quantifier");
        return n;
    }

    // One code point of the pattern text (UTF-8).
    uint32_t literal() {
        const uint8_t c = uint8_t(p_[i_++]);
        if (c < 0x80) return c;
        const int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
        uint32_t cp = c & (0x3F >> n);
        for (int k = 0; k < n && i_ < p_.size(); ++k) cp = cp << 6 | (uint8_t(p_[i_++]) & 0x3F);
        return cp;
    }

    uint32_t hex(int n) {
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
            if (i_ >= p_.size() || !std::isxdigit(uint8_t(p_[i_])))
                refuse(n == 2 ? "a malformed \\x escape" : "a malformed \\u escape");
            const char h = p_[i_++];
            v = v * 16 + uint32_t(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        return v;
    }

    // After a backslash: a set (\d ...) into `set` (returns true), or one code point into `cp`.
    bool escape(bool in_class, Ranges& set, uint32_t& cp) {
        if (i_ >= p_.size()) refuse("a trailing backslash");
        const char c = p_[i_++];
        switch (c) {
            case 'd':
                set = digit();
                return true;
            case 'D':
                set = complement(digit());
                return true;
            case 'w':
                set = word();
                return true;
            case 'W':
                set = complement(word());
                return true;
            case 's':
                set = space();
                return true;
            case 'S':
                set = complement(space());
                return true;
            case 'n':
                cp = '\n';
                return false;
            case 'r':
                cp = '\r';
                return false;
            case 't':
                cp = '\t';
                return false;
            case 'f':
                cp = '\f';
                return false;
            case 'v':
                cp = '\v';
                return false;
            case 'x':
                cp = hex(2);
                return false;
            case 'u':
                if (i_ < p_.size() && p_[i_] == '{') refuse("\\u{...}");
                cp = hex(4);
                return false;
            case 'b':
                if (in_class) {
                    cp = '\b';
                    return false;
                }
                --i_;
                refuse("the word boundary \\b");
            case '0':
                if (i_ < p_.size() && std::isdigit(uint8_t(p_[i_]))) refuse("an octal escape");
                cp = 0;
                return false;
            default:
                --i_;
                if (c >= '1' && c <= '9') refuse("a backreference");
                if (std::isalnum(uint8_t(c)) || uint8_t(c) >= 0x80)
                    refuse(std::string("the escape \\") + c);
                ++i_;
                cp = uint8_t(c);
                return false;
        }
    }

    Re bracket() {  // after '['
        const bool negate = eat('^');
        Ranges r;
        bool first = true;
        for (;;) {
            if (i_ >= p_.size()) refuse("an unterminated [class]");
            if (p_[i_] == ']' && !first) break;
            if (p_[i_] == ']') refuse("an empty class []");
            first = false;
            Ranges set;
            uint32_t lo = 0;
            bool is_set = false;
            if (eat('\\'))
                is_set = escape(true, set, lo);
            else
                lo = literal();
            if (is_set) {
                r.insert(r.end(), set.begin(), set.end());
                continue;
            }
            uint32_t hi = lo;
            if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
                ++i_;
                if (eat('\\')) {
                    if (escape(true, set, hi)) refuse("a class escape as the end of a range");
                } else {
                    hi = literal();
                }
                if (hi < lo) refuse("a range out of order");
            }
            r.emplace_back(lo, hi);
        }
        ++i_;  // ']'
        r = normalize(r);
        return klass(negate ? complement(r) : r);
    }

    Re atom(int depth) {
        const char c = p_[i_];
        if (c == '(') {
            // Bounded: the parser and the automaton's builder recurse once per level.
            if (depth >= kMaxGroupDepth) refuse("groups nested deeper than 32");
            ++i_;
            if (eat('?')) {
                if (!eat(':')) {
                    --i_;
                    refuse("a lookaround or named group (?...)");
                }
            }
            Re inner = alternation(depth + 1);
            if (!eat(')')) refuse("an unclosed group");
            return inner;
        }
        if (c == '[') {
            ++i_;
            return bracket();
        }
        if (c == '.') {
            ++i_;
            return klass(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
        }
        if (c == '\\') {
            ++i_;
            Ranges set;
            uint32_t cp = 0;
            if (escape(false, set, cp)) return klass(normalize(set));
            return klass({{cp, cp}});
        }
        if (c == '^') refuse("'^' not at the start");
        if (c == '$') refuse("'$' not at the end");
        if (std::string_view("*+?{").find(c) != std::string_view::npos)
            refuse(std::string("a quantifier '") + c + "' with nothing to repeat");
        if (c == ']' || c == '}') refuse(std::string("an unescaped '") + c + "'");
        const uint32_t cp = literal();
        return klass({{cp, cp}});
    }

    const std::string& p_;
    const std::string& ptr_;
    const char* keyword_;
    size_t i_ = 0;
};

}  // namespace

Re node(Re::Kind k) {
    Re r;
    r.kind = k;
    return r;
}

Re klass(Ranges cls) {
    Re r;
    r.kind = Re::kClass;
    r.cls = std::move(cls);
    return r;
}

Re parse_pattern(const std::string& pattern, const std::string& ptr, const char* keyword) {
    return Parser(pattern, ptr, keyword).parse();
}

Ranges without_surrogates(const Ranges& r) {
    Ranges out;
    for (auto [a, b] : r) {
        if (b < 0xD800 || a > 0xDFFF) {
            out.emplace_back(a, b);
            continue;
        }
        if (a < 0xD800) out.emplace_back(a, 0xD7FF);
        if (b > 0xDFFF) out.emplace_back(0xE000, b);
    }
    return out;
}

bool has(const Ranges& r, uint32_t lo, uint32_t hi) {
    for (const auto& [a, b] : r)
        if (a <= hi && lo <= b) return true;
    return false;
}

uint32_t min_bytes(const Ranges& r) {
    const auto any_of = [&](std::initializer_list<uint32_t> cps) {
        for (uint32_t c : cps)
            if (has(r, c, c)) return true;
        return false;
    };
    if (has(r, 0x20, 0x21) || has(r, 0x23, 0x5B) || has(r, 0x5D, 0x7F)) return 1;
    if (any_of({'"', '\\', '\b', '\f', '\n', '\r', '\t'}) || has(r, 0x80, 0x7FF)) return 2;
    if (has(r, 0x800, 0xFFFF)) return 3;
    if (has(r, 0x10000, kMaxCp)) return 4;
    if (has(r, 0, 0x1F)) return 6;  // \u00XX
    return kNoBytes;
}

}  // namespace specula::pattern
