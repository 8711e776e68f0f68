// StringRule: see string_rule.h. A pattern is parsed into a small tree (classes, sequences,
// alternations, repetitions), then positions are laid out Glushkov's way (a fresh copy of the
// repeated expression for each counted repetition), then the completion table is filled from the
// longest count down.
#include "sampling/string_rule.h"

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace specula {

namespace {

using json = nlohmann::json;
using Ranges = StringRule::Ranges;

constexpr uint32_t kMaxCp = 0x10FFFF;
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

// Code points a JSON string can hold: no surrogates (GrammarState never produces them).
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

// The fewest bytes of JSON string content that write one code point of `r`.
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
    return StringRule::kInf;
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

struct Re {
    enum Kind { kClass, kCat, kAlt, kRep } kind = kCat;
    Ranges cls;
    std::vector<Re> kids;
    int min = 0, max = 0;  // kRep; max -1: unbounded
};

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

struct Glu {
    bool nullable = true;
    uint64_t first = 0, last = 0;
};

class Builder {
  public:
    Builder(StringRule& r, const std::string& ptr, const char* keyword, const std::string& text)
        : r_(r), ptr_(ptr), keyword_(keyword), text_(text) {}

    Glu build(const Re& e) {
        switch (e.kind) {
            case Re::kClass: {
                if (r_.classes.size() >= size_t(StringRule::kMaxPositions))
                    fail("json_schema: '", keyword_, "' at ", ptr_.empty() ? "/" : ptr_, " (\"",
                         text_, "\") needs more than ", StringRule::kMaxPositions,
                         " positions (characters and classes, counted repetitions "
                         "expanded); "
                         "not supported");
                const int p = int(r_.classes.size());
                r_.classes.push_back(without_surrogates(e.cls));
                return Glu{false, uint64_t(1) << p, uint64_t(1) << p};
            }
            case Re::kCat: {
                Glu g;
                for (const Re& k : e.kids) g = cat(g, build(k));
                return g;
            }
            case Re::kAlt: {
                Glu g{false, 0, 0};
                for (const Re& k : e.kids) {
                    const Glu b = build(k);
                    g.nullable |= b.nullable, g.first |= b.first, g.last |= b.last;
                }
                return g;
            }
            default: {
                Glu g;
                for (int k = 0; k < e.min; ++k) g = cat(g, build(e.kids[0]));
                if (e.max < 0) {
                    Glu s = build(e.kids[0]);
                    link(s.last, s.first);
                    s.nullable = true;
                    g = cat(g, s);
                }
                for (int k = e.min; k < e.max; ++k) {
                    Glu o = build(e.kids[0]);
                    o.nullable = true;
                    g = cat(g, o);
                }
                return g;
            }
        }
    }

  private:
    void link(uint64_t from, uint64_t to) {
        for (; from; from &= from - 1) r_.follow[size_t(std::countr_zero(from))] |= to;
    }

    Glu cat(const Glu& a, const Glu& b) {
        link(a.last, b.first);
        return Glu{a.nullable && b.nullable, a.first | (a.nullable ? b.first : 0),
                   b.last | (b.nullable ? a.last : 0)};
    }

    StringRule& r_;
    const std::string& ptr_;
    const char* keyword_;
    const std::string& text_;
};

// Built-in formats, as patterns. Dates: month 01-12, the days each month has (February:
// 01-28, leap days are not produced); times: hours 00-23, no leap second, a time zone (Z or
// +-HH:MM).
const char* format_pattern(const std::string& f) {
#define SPECULA_DATE                                                                            \
    "\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)" \
    "|02-(?:0[1-9]|1\\d|2[0-8]))"
#define SPECULA_TIME \
    "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)"
    if (f == "date") return "^" SPECULA_DATE "$";
    if (f == "time") return "^" SPECULA_TIME "$";
    if (f == "date-time") return "^" SPECULA_DATE "T" SPECULA_TIME "$";
    if (f == "uuid") return "^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$";
#undef SPECULA_DATE
#undef SPECULA_TIME
    return nullptr;
}

int32_t length_field(const json& s, const char* key, const std::string& ptr) {
    const json& v = s.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        fail("json_schema: '", key, "' at ", ptr.empty() ? "/" : ptr,
             " must be a non-negative integer");
    return int32_t(v.get<int64_t>());
}

// Fills r.dist: per count row and position, the fewest bytes that complete the string.
void fill_table(StringRule& r, const std::string& ptr) {
    const size_t stride = size_t(r.start) + 1;
    const bool bounded = r.max_length >= 0;
    const uint32_t top = uint32_t(bounded ? r.max_length : r.min_length);
    if ((size_t(top) + 1) * stride > StringRule::kMaxTableCells)
        fail("json_schema: ", bounded ? "'maxLength' " : "'minLength' ", top, " at ",
             ptr.empty() ? "/" : ptr, " is too large for its pattern (", top + 1, " x ", stride,
             " table cells, at most ", StringRule::kMaxTableCells, ")");
    r.rows = top + 1;
    r.dist.assign(size_t(r.rows) * stride, StringRule::kInf);
    std::vector<uint32_t> cost(stride, StringRule::kInf);
    for (size_t q = 0; q < r.classes.size(); ++q) cost[q] = min_bytes(r.classes[q]);
    for (uint32_t n = top + 1; n-- > 0;) {
        uint32_t* row = &r.dist[size_t(n) * stride];
        const bool len_ok = n >= uint32_t(r.min_length);
        for (size_t p = 0; p < stride; ++p)
            if (len_ok && (r.last >> p & 1)) row[p] = 0;
        // The next code point lands in row n + 1; the last row of an unbounded rule is its
        // own successor (relaxed until stable).
        const uint32_t* next = n < top ? row + stride : bounded ? nullptr : row;
        if (!next) continue;
        for (size_t round = 0; round < (next == row ? stride + 1 : 1); ++round) {
            bool changed = false;
            for (size_t p = 0; p < stride; ++p)
                for (uint64_t f = r.follow[p]; f; f &= f - 1) {
                    const size_t q = size_t(std::countr_zero(f));
                    if (cost[q] == StringRule::kInf || next[q] == StringRule::kInf) continue;
                    const uint32_t d = cost[q] + next[q];
                    if (d < row[p]) row[p] = d, changed = true;
                }
            if (!changed) break;
        }
    }
}

}  // namespace

uint32_t StringRule::rest(uint64_t state, uint32_t count) const {
    const uint32_t* row = &dist[size_t(std::min(count, rows - 1)) * size_t(start + 1)];
    uint32_t m = kInf;
    for (; state; state &= state - 1) m = std::min(m, row[std::countr_zero(state)]);
    return m;
}

uint64_t StringRule::next(uint64_t state, uint32_t count, uint32_t cp) const {
    if (max_length >= 0 && count >= uint32_t(max_length)) return 0;
    uint64_t t = 0;
    for (; state; state &= state - 1) t |= follow[size_t(std::countr_zero(state))];
    const uint32_t* row = &dist[size_t(std::min(count + 1, rows - 1)) * size_t(start + 1)];
    uint64_t out = 0;
    for (; t; t &= t - 1) {
        const int q = std::countr_zero(t);
        if (row[q] != kInf && has(classes[size_t(q)], cp, cp)) out |= uint64_t(1) << q;
    }
    return out;
}

uint32_t StringRule::rest_after(uint64_t state, uint32_t count, uint32_t lo, uint32_t hi) const {
    if (max_length >= 0 && count >= uint32_t(max_length)) return kInf;
    uint64_t t = 0;
    for (; state; state &= state - 1) t |= follow[size_t(std::countr_zero(state))];
    const uint32_t* row = &dist[size_t(std::min(count + 1, rows - 1)) * size_t(start + 1)];
    uint32_t m = kInf;
    for (; t; t &= t - 1) {
        const int q = std::countr_zero(t);
        if (row[q] < m && has(classes[size_t(q)], lo, hi)) m = row[q];
    }
    return m;
}

StringRule compile_string_rule(const json& s, const std::string& ptr) {
    StringRule r;
    if (s.contains("minLength")) r.min_length = length_field(s, "minLength", ptr);
    if (s.contains("maxLength")) r.max_length = length_field(s, "maxLength", ptr);
    if (r.max_length >= 0 && r.max_length < r.min_length)
        fail("json_schema: maxLength ", r.max_length, " < minLength ", r.min_length, " at ",
             ptr.empty() ? "/" : ptr);
    if (s.contains("pattern") && s.contains("format"))
        fail("json_schema: 'pattern' next to 'format' at ", ptr.empty() ? "/" : ptr,
             " is not supported");
    std::string text;  // the pattern, or the format's
    const char* keyword = "pattern";
    if (s.contains("pattern")) {
        if (!s["pattern"].is_string())
            fail("json_schema: 'pattern' at ", ptr.empty() ? "/" : ptr, " must be a string");
        text = s["pattern"].get<std::string>();
    } else if (s.contains("format")) {
        keyword = "format";
        const json& f = s["format"];
        const char* p = f.is_string() ? format_pattern(f.get<std::string>()) : nullptr;
        if (!p)
            fail("json_schema: format ", f.dump(), " at ", ptr.empty() ? "/" : ptr,
                 " is not supported (date, time, date-time, uuid)");
        text = p;
    }
    Re re;
    if (s.contains("pattern") || s.contains("format")) {
        re = Parser(text, ptr, keyword).parse();
        // ^X{n,m}$ with X one class (as in "^[a-z0-9 ]{1,100}$"): X* with n..m code points, so
        // a long count needs no positions.
        if (re.kids.size() == 1 && re.kids[0].kids.size() == 1 &&
            re.kids[0].kids[0].kids.size() == 1 && re.kids[0].kids[0].kids[0].kind == Re::kRep &&
            re.kids[0].kids[0].kids[0].kids[0].kind == Re::kClass) {
            Re rep = std::move(re.kids[0].kids[0].kids[0]);
            r.min_length = std::max(r.min_length, rep.min);
            if (rep.max >= 0)
                r.max_length = r.max_length < 0 ? rep.max : std::min(r.max_length, rep.max);
            rep.min = 0, rep.max = -1;
            re = std::move(rep);
        }
    } else {  // no pattern: any code point, any number of times
        re = node(Re::kRep);
        re.max = -1;
        re.kids.push_back(klass({{0, kMaxCp}}));
    }
    const Glu g = Builder(r, ptr, keyword, text).build(re);
    r.start = int(r.classes.size());
    r.follow[size_t(r.start)] = g.first;
    r.last = g.last | (g.nullable ? r.initial() : 0);
    const Ranges all = without_surrogates({{0, kMaxCp}});
    for (size_t p = 0; p < r.classes.size(); ++p)
        if (r.classes[p] == all && (r.last >> p & 1) && (r.follow[p] >> p & 1))
            r.free |= uint64_t(1) << p;
    uint64_t before_free = 0;  // accepting positions a free one may follow (e.g. the k of "ok")
    for (int p = 0; p <= r.start; ++p)
        if ((r.last >> p & 1) && (r.follow[size_t(p)] & r.free)) before_free |= uint64_t(1) << p;
    r.free |= before_free;
    uint64_t loops = 0;  // every code point, repeating (accepting or not)
    for (size_t p = 0; p < r.classes.size(); ++p)
        if (r.classes[p] == all && (r.follow[p] >> p & 1)) loops |= uint64_t(1) << p;
    for (int p = 0; p <= r.start; ++p)
        if ((loops >> p & 1) || (r.follow[size_t(p)] & loops)) r.open |= uint64_t(1) << p;
    fill_table(r, ptr);
    if (r.rest(r.initial(), 0) == StringRule::kInf)
        fail("json_schema: no string matches ",
             keyword == std::string("format") ? "'format'" : "'pattern'",
             s.contains("minLength") || s.contains("maxLength")
                 ? " within 'minLength' / 'maxLength'"
                 : "",
             " at ", ptr.empty() ? "/" : ptr);
    return r;
}

}  // namespace specula
