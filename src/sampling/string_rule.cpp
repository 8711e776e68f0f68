// StringRule: see string_rule.h. A pattern is parsed into a small tree (classes, sequences,
// alternations, repetitions), then positions are laid out Glushkov's way (a fresh copy of the
// repeated expression for each counted repetition), then the completion table is filled from the
// longest count down.
#include "sampling/string_rule.h"

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "sampling/string_pattern.h"

namespace specula {

namespace {

using json = nlohmann::json;
using Ranges = StringRule::Ranges;
using pattern::has;
using pattern::klass;
using pattern::kMaxCp;
using pattern::min_bytes;
using pattern::node;
using pattern::parse_pattern;
using pattern::Re;
using pattern::without_surrogates;
static_assert(pattern::kNoBytes == StringRule::kInf);  // min_bytes fills the table's costs

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
        re = parse_pattern(text, ptr, keyword);
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
