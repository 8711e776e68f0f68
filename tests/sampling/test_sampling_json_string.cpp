// String keywords of the JSON grammar (minLength, maxLength, pattern, format; string_rule.h):
// hand-written texts accepted or refused at the right byte (escapes and UTF-8 characters count as
// one code point; unanchored and anchored patterns; date ranges), the refused constructs by their
// error text, and byte-level random walks over schemas with these keywords: every byte the
// matcher accepts leaves a completable prefix (some byte always follows until the end), the
// shortest completion (min_remaining) is exact (the best byte lowers it by exactly one), and every
// walked text parses with nlohmann and matches the keywords as checked by std::wregex (ECMAScript,
// search semantics) on the decoded code points and a code-point count.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>

#include "common/error.h"
#include "grammar_test_util.h"
#include "sampling/grammar_state.h"
#include "sampling/json_grammar.h"

using namespace specula;
using json = nlohmann::json;

namespace {

int run(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
    return test::grammar_run(g, text);
}

std::shared_ptr<const JsonGrammar> schema(const std::string& s) {
    return json_schema_grammar(json::parse(s));
}

std::string error_of(const std::string& s) {
    try {
        schema(s);
    } catch (const Error& e) {
        return e.what();
    }
    return "no error";
}

std::shared_ptr<const JsonGrammar> pat(const std::string& p, const std::string& extra = "") {
    return schema(R"({"type": "string", "pattern": )" + json(p).dump() + extra + "}");
}

std::u32string code_points(const std::string& s) {
    std::u32string out;
    for (size_t i = 0; i < s.size();) {
        const uint8_t c = uint8_t(s[i]);
        const int n = c < 0x80 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
        char32_t cp = n == 0 ? c : c & (0x3F >> n);
        for (int k = 1; k <= n; ++k) cp = cp << 6 | (uint8_t(s[i + size_t(k)]) & 0x3F);
        out.push_back(cp);
        i += size_t(n) + 1;
    }
    return out;
}

}  // namespace

TEST(JsonString, LengthsCountCodePoints) {
    const auto g = schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
    EXPECT_EQ(run(g, "\"ab\""), -1);
    EXPECT_EQ(run(g, "\"abc\""), -1);
    EXPECT_EQ(run(g, "\"a\""), 2);                          // too short: the quote is refused
    EXPECT_EQ(run(g, "\"abcd\""), 4);                       // the fourth code point is refused
    EXPECT_EQ(run(g, "\"\\n\\u00e9\""), -1);                // two escapes, two code points
    EXPECT_EQ(run(g, "\"\xC3\xA9\xF0\x9F\x98\x80\""), -1);  // é and 😀 raw: two
    EXPECT_EQ(run(g, "\"\xF0\x9F\x98\x80\""), 5);           // one code point (4 bytes): too short
    EXPECT_EQ(run(g, "\"\\\"\\\\\\/\\t\""), 7);             // four escapes: the fourth '\' refused
    EXPECT_EQ(run(g, "\"\\\"\\\\\\/\""), -1);
    GrammarState lim(g);
    EXPECT_TRUE(lim.advance("\"a"));
    EXPECT_TRUE(lim.in_plain_string());
    EXPECT_EQ(lim.plain_string_budget(), 2u);  // maxLength 3: two more code points
    GrammarState anchored(pat("^a+$"));
    EXPECT_TRUE(anchored.advance("\"a"));
    EXPECT_FALSE(anchored.in_plain_string());
    const auto one = schema(R"({"type": "string", "maxLength": 1})");
    EXPECT_EQ(run(one, "\"\\u00e9\""), -1);
    EXPECT_EQ(run(one, "\"\""), -1);
    EXPECT_EQ(run(one, "\"x\\"), 2);
    const auto at_least = schema(R"({"type": "string", "minLength": 3})");
    EXPECT_EQ(run(at_least, "\"\xE2\x82\xAC\xE2\x82\xAC\""), 7);
    EXPECT_EQ(run(at_least, "\"\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC longer\""), -1);
    GrammarState st(at_least);
    EXPECT_TRUE(st.advance("\"a"));
    // Content is free (only the closing quote waits for the count): the mask's fast path.
    EXPECT_TRUE(st.in_plain_string());
    EXPECT_EQ(st.plain_string_budget(), SIZE_MAX);
    EXPECT_EQ(st.min_remaining(), 3u);  // two more code points and the quote
}

TEST(JsonString, PatternsSearchUnlessAnchored) {
    EXPECT_EQ(run(pat("ab"), "\"xxabyy\""), -1);
    EXPECT_EQ(run(pat("ab"), "\"xaxb\""), 5);
    EXPECT_EQ(run(pat("^ab"), "\"abzz\""), -1);
    EXPECT_EQ(run(pat("^ab"), "\"zab\""), 1);
    EXPECT_EQ(run(pat("ab$"), "\"zzab\""), -1);
    EXPECT_EQ(run(pat("ab$"), "\"abz\""), 4);
    EXPECT_EQ(run(pat("^a+$"), "\"aaa\""), -1);
    EXPECT_EQ(run(pat("^a+$"), "\"aab\""), 3);
    EXPECT_EQ(run(pat("^a+$"), "\"\""), 1);
    EXPECT_EQ(run(pat("^$|^x$"), "\"\""), -1);
    EXPECT_EQ(run(pat("^$|^x$"), "\"x\""), -1);
    EXPECT_EQ(run(pat("^ab|cd$"), "\"ab...\""), -1);
    EXPECT_EQ(run(pat("^ab|cd$"), "\"...cd\""), -1);
    EXPECT_EQ(run(pat("^ab|cd$"), "\"..ab\""), 5);
    EXPECT_EQ(run(pat(""), "\"anything\""), -1);
}

TEST(JsonString, PatternConstructs) {
    const auto id = pat("^[a-z0-9_]+$");
    EXPECT_EQ(run(id, "\"snake_case_2\""), -1);
    EXPECT_EQ(run(id, "\"Upper\""), 1);
    EXPECT_EQ(run(id, "\"\xC3\xA9\""), 1);  // no 2-byte code point is admitted: the lead byte
    EXPECT_EQ(run(id, "\"\\u0061\\u005f\""), -1);  // "a_" written as escapes
    EXPECT_EQ(run(id, "\"\\u0041\""), 5);          // "A": \u004X holds no admitted code point
    EXPECT_EQ(run(id, "\"\\u01\""), 4);            // no code point 0x01XX matches
    EXPECT_EQ(run(pat("^[^0-9]*$"), "\"abc \xC3\xA9\""), -1);
    EXPECT_EQ(run(pat("^[^0-9]*$"), "\"ab1\""), 3);
    EXPECT_EQ(run(pat("^\\d{3}-\\w\\s\\D$"), "\"123-_\\tx\""), -1);
    EXPECT_EQ(run(pat("^\\d{3}-\\w\\s\\D$"), "\"123-_\\t7\""), 8);
    EXPECT_EQ(run(pat("^a.b$"),
                  "\"a\xC3\xA9"
                  "b\""),
              -1);
    EXPECT_EQ(run(pat("^a.b$"), "\"a\\nb\""), 3);  // '.' is not a line terminator
    EXPECT_EQ(run(pat("^\\u00e9\\.$"), "\"\xC3\xA9.\""), -1);
    EXPECT_EQ(run(pat("^\\u00e9\\.$"), "\"\\u00E9.\""), -1);
    EXPECT_EQ(run(pat("^\\u00e9\\.$"), "\"\xC3\xA8\""), 2);  // è: refused at its second byte
    const auto rep = pat("^(ab|cd){2,3}$");
    EXPECT_EQ(run(rep, "\"abcd\""), -1);
    EXPECT_EQ(run(rep, "\"cdcdab\""), -1);
    EXPECT_EQ(run(rep, "\"ab\""), 3);
    EXPECT_EQ(run(rep, "\"abcdabcd"), 7);  // a fourth pair is refused at its first byte
    EXPECT_EQ(run(pat("^(?:x|y)+?z{2,}$"), "\"xyxzzz\""), -1);
    EXPECT_EQ(run(pat("^(?:x|y)+?z{2,}$"), "\"xz\""), 3);
    EXPECT_EQ(run(pat("^[\\-+]?\\d+(\\.\\d+)?$"), "\"-12.50\""), -1);
    EXPECT_EQ(run(pat("^[\\-+]?\\d+(\\.\\d+)?$"), "\"12.\""), 4);
    EXPECT_EQ(run(pat("^[\xC3\xA0-\xC3\xBF]$"), "\"\xC3\xA9\""), -1);  // a range of é's kind
}

TEST(JsonString, PatternWithLengths) {
    const auto g = pat("^[a-c]+$", R"(, "minLength": 2, "maxLength": 4)");
    EXPECT_EQ(run(g, "\"ab\""), -1);
    EXPECT_EQ(run(g, "\"a\""), 2);
    EXPECT_EQ(run(g, "\"abcab\""), 5);
    // (xy)* with an odd exact length has no string: refused when compiled, not a dead end later.
    EXPECT_NE(error_of(R"({"type": "string", "pattern": "^(xy)*$", "minLength": 3,
                           "maxLength": 3})")
                  .find("no string matches 'pattern' within 'minLength' / 'maxLength' at /"),
              std::string::npos);
    // Length 4 or 6 only: after "xyx" the count 5 cannot end; "xyxy" then ends or goes on.
    const auto even = pat("^(xy)*$", R"(, "minLength": 3, "maxLength": 6)");
    EXPECT_EQ(run(even, "\"xyxy\""), -1);
    EXPECT_EQ(run(even, "\"xyxyxy\""), -1);
    EXPECT_EQ(run(even, "\"xy\""), 3);
    // An unanchored pattern with a maxLength: "ab" must still fit.
    const auto fit = pat("ab", R"(, "maxLength": 3)");
    EXPECT_EQ(run(fit, "\"xab\""), -1);
    EXPECT_EQ(run(fit, "\"xx\""), 2);  // "ab" would not fit any more
    EXPECT_EQ(run(fit, "\"xa\""), 3);
    GrammarState st(fit);
    EXPECT_TRUE(st.advance("\"x"));
    EXPECT_EQ(st.min_remaining(), 3u);  // "ab" and the quote
}

TEST(JsonString, Formats) {
    const auto date = schema(R"({"type": "string", "format": "date"})");
    EXPECT_EQ(run(date, "\"2024-01-31\""), -1);
    EXPECT_EQ(run(date, "\"1999-12-01\""), -1);
    EXPECT_EQ(run(date, "\"2024-02-28\""), -1);
    EXPECT_EQ(run(date, "\"2024-13-01\""), 7);
    EXPECT_EQ(run(date, "\"2024-00-01\""), 7);
    EXPECT_EQ(run(date, "\"2024-04-31\""), 10);
    EXPECT_EQ(run(date, "\"2024-01-32\""), 10);
    EXPECT_EQ(run(date, "\"2024-02-29\""), 10);  // leap days are not produced (documented)
    EXPECT_EQ(run(date, "\"2024-1-01\""), 7);
    const auto time = schema(R"({"type": "string", "format": "time"})");
    EXPECT_EQ(run(time, "\"23:59:59Z\""), -1);
    EXPECT_EQ(run(time, "\"00:00:00.125+05:30\""), -1);
    EXPECT_EQ(run(time, "\"24:00:00Z\""), 2);
    EXPECT_EQ(run(time, "\"12:60:00Z\""), 4);
    EXPECT_EQ(run(time, "\"12:00:00\""), 9);  // a time zone is required
    const auto dt = schema(R"({"type": "string", "format": "date-time"})");
    EXPECT_EQ(run(dt, "\"2024-06-01T12:30:00Z\""), -1);
    EXPECT_EQ(run(dt, "\"2024-06-01T12:30:00.5-08:00\""), -1);
    EXPECT_EQ(run(dt, "\"2024-06-01 12:30:00Z\""), 11);
    const auto uuid = schema(R"({"type": "string", "format": "uuid"})");
    EXPECT_EQ(run(uuid, "\"123e4567-e89b-12d3-A456-426614174000\""), -1);
    EXPECT_EQ(run(uuid, "\"123e4567e89b\""), 9);
    EXPECT_EQ(run(uuid, "\"123e4567-e89b-12d3-a456-42661417400\""), 36);
    EXPECT_EQ(run(uuid, "\"123g\""), 4);
    // with lengths: a date is 10 code points
    EXPECT_NE(error_of(R"({"type": "string", "format": "date", "maxLength": 9})")
                  .find("no string matches 'format' within"),
              std::string::npos);
}

TEST(JsonString, InsideObjectsKeysAndUnions) {
    const auto g = schema(R"({"type": "object", "additionalProperties":
        {"type": "string", "pattern": "^v"}})");
    EXPECT_EQ(run(g, R"({"any key at all": "value", "k2": "v"})"), -1);
    EXPECT_EQ(run(g, R"({"k": "x"})"), 7);
    const auto u = schema(R"({"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]})");
    EXPECT_EQ(run(u, "null"), -1);
    EXPECT_EQ(run(u, "\"00000000-0000-0000-0000-00000000000z\""), 36);
    const auto e = schema(R"({"type": ["string", "integer"], "minLength": 2})");
    EXPECT_EQ(run(e, "7"), -1);  // minLength constrains strings only
    EXPECT_EQ(run(e, "\"7\""), 2);
    GrammarState st(schema(R"({"type": "object", "properties": {"id": {"type": "string",
        "pattern": "^[0-9]{4}$"}}, "required": ["id"], "additionalProperties": false})"));
    // {"id":"" + 4 digits + "}: the shortest completion from the start
    EXPECT_EQ(st.min_remaining(), std::string(R"({"id":"0000"})").size());
}

TEST(JsonString, RefusedKeywordsAndConstructs) {
    const auto err = [](const std::string& p) {
        return error_of(R"({"properties": {"x": {"type": "string", "pattern": )" + json(p).dump() +
                        "}}}");
    };
    const auto has = [](const std::string& e, const std::string& part) {
        return e.find(part) != std::string::npos;
    };
    const std::pair<const char*, const char*> cases[] = {
        {"(a)\\1", "a backreference"},
        {"(?=a)b", "lookaround"},
        {"(?<n>a)", "lookaround or named group"},
        {"\\bfoo", "the word boundary \\b"},
        {"a^b", "'^' not at the start"},
        {"(a$)", "'$' not at the end"},
        {"\\p{L}", "the escape \\p"},
        {"[a-", "an unterminated [class]"},
        {"(ab", "an unclosed group"},
        {"ab)", "an unbalanced ')'"},
        {"*a", "nothing to repeat"},
        {"a{3,2}", "m < n"},
        {"a**", "a quantifier after a quantifier"},
        {"[z-a]", "a range out of order"},
        {"\\u{1F600}", "\\u{...}"},
        {"^(ab){32}$", "needs more than 63 positions"},
        {"^a{64}b$", "needs more than 63 positions"},
    };
    for (const auto& [p, what] : cases) {
        const std::string e = err(p);
        EXPECT_TRUE(has(e, "'pattern' at /properties/x") && has(e, what)) << p << ": " << e;
    }
    EXPECT_EQ(err("^a{62}b$"), "no error");
    // Deep nesting is refused before it recurses far (a request must never overflow the stack),
    // and so is a nest of counts that would expand past the position limit.
    EXPECT_TRUE(has(err(std::string(100000, '(') + "a" + std::string(100000, ')')),
                    "groups nested deeper than 32"))
        << err(std::string(100000, '(') + "a" + std::string(100000, ')')).substr(0, 200);
    EXPECT_EQ(err(std::string(32, '(') + "a" + std::string(32, ')')), "no error");
    EXPECT_TRUE(has(err("(((((a{9}){9}){9}){9}){9}){9}"), "needs more than 63 positions"));
    // ^X{n,m}$ with X one class is X* within n..m code points: no positions for the count.
    const auto long_run = pat("^[a-z0-9 ]{3,100}$", R"(, "maxLength": 80)");
    EXPECT_EQ(run(long_run, "\"ab\""), 3);
    EXPECT_EQ(run(long_run, "\"" + std::string(80, 'x') + "\""), -1);
    EXPECT_EQ(run(long_run, "\"" + std::string(81, 'x') + "\""), 81);
    EXPECT_EQ(run(long_run, "\"abC"), 3);
    EXPECT_TRUE(has(error_of(R"({"pattern": "^a{5}$", "maxLength": 3})"),
                    "no string matches 'pattern' within 'minLength' / 'maxLength' at /"));
    EXPECT_TRUE(has(error_of(R"({"type": "string", "format": "email"})"),
                    "format \"email\" at / is not supported (date, time, date-time, uuid)"));
    EXPECT_TRUE(has(error_of(R"({"type": "string", "minLength": -1})"), "'minLength' at /"));
    EXPECT_TRUE(has(error_of(R"({"type": "string", "maxLength": "3"})"), "'maxLength' at /"));
    EXPECT_TRUE(has(error_of(R"({"minLength": 4, "maxLength": 3})"), "maxLength 3 < minLength 4"));
    EXPECT_TRUE(has(error_of(R"({"pattern": 5})"), "'pattern' at / must be a string"));
    EXPECT_TRUE(has(error_of(R"({"pattern": "a", "format": "date"})"), "next to 'format'"));
    EXPECT_TRUE(has(error_of(R"({"enum": ["a"], "pattern": "a"})"), "'pattern' next to enum"));
    EXPECT_TRUE(has(error_of(R"({"pattern": "^\\w+@\\w{1,30}$", "maxLength": 1000000})"),
                    "'maxLength' 1000000 at / is too large for its pattern"));
    EXPECT_EQ(error_of(R"({"type": "string", "maxLength": 100000})"), "no error");
}

namespace {

struct WalkSchema {
    const char* schema;
    const char* pattern;  // for std::wregex; nullptr: none
    int min_len, max_len;
};

// Patterns std::wregex reads as JSON Schema does (no '.', \s, \w: their non-ASCII sets differ).
const WalkSchema kWalks[] = {
    {R"({"type": "string", "minLength": 3, "maxLength": 8})", nullptr, 3, 8},
    {R"({"type": "string", "minLength": 5})", nullptr, 5, -1},
    {R"({"type": "string", "pattern": "ab|c[0-9]"})", "ab|c[0-9]", 0, -1},
    {R"({"type": "string", "pattern": "^[A-Z][a-z]*( [A-Z][a-z]*){0,2}$"})",
     "^[A-Z][a-z]*( [A-Z][a-z]*){0,2}$", 0, -1},
    {R"({"type": "string", "pattern": "^[^\"\\\\]{2,}$", "maxLength": 6})", "^[^\"\\\\]{2,}$", 0,
     6},
    {R"({"type": "string", "pattern": "^(xy)*z?$", "minLength": 3, "maxLength": 9})", "^(xy)*z?$",
     3, 9},
    {R"({"type": "string", "pattern": "\\d{2}$", "minLength": 4})", "\\d{2}$", 4, -1},
    {R"({"type": "string", "pattern": "^[\u00e0-\u00ff\\u4e00-\\u4e0f]+\\.$"})",
     "^[\u00e0-\u00ff\\u4e00-\\u4e0f]+\\.$", 0, -1},
    {R"({"type": "string", "pattern": "^[\\x00-\\x1f\"\\\\]{1,3}$"})", "^[\\x00-\\x1f\"\\\\]{1,3}$",
     0, -1},
    {R"({"type": "string", "format": "date"})",
     "^\\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])|(0[469]|11)-(0[1-9]|[12]\\d|30)|02-(0[1-9]"
     "|1\\d|2[0-8]))$",
     0, -1},
    {R"({"type": "string", "format": "date-time"})",
     "^\\d{4}-\\d\\d-\\d\\dT([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d+)?(Z|[+-]([01]\\d|2[0-3]):[0-"
     "5]"
     "\\d)$",
     0, -1},
    {R"({"type": "string", "format": "uuid"})",
     "^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$", 0, -1},
};

// One byte-level walk: uniform over the accepted bytes (ASCII ones half of the time) for `uniform`
// steps, then the byte with the shortest completion. Returns the text.
std::string byte_walk(const std::shared_ptr<const JsonGrammar>& g, std::mt19937& rng, int uniform) {
    GrammarState st(g);
    std::string text;
    for (int step = 0; step < 2000; ++step) {
        EXPECT_EQ(st.can_end(), st.min_remaining() == 0) << text;
        if (st.finished()) return text;
        std::vector<uint8_t> ok, ascii;
        const size_t before = st.min_remaining();
        size_t best_rem = SIZE_MAX;
        uint8_t best = 0;
        for (int b = 0; b < 256; ++b) {
            GrammarState s(st);
            if (!s.step(uint8_t(b))) continue;
            ok.push_back(uint8_t(b));
            if (b < 0x80) ascii.push_back(uint8_t(b));
            const size_t r = s.min_remaining();
            EXPECT_GE(r + 1, before) << "byte " << b << " after " << text;
            if (r < best_rem) best_rem = r, best = uint8_t(b);
        }
        if (ok.empty()) {
            ADD_FAILURE() << "a dead end after: " << text;
            return text;
        }
        uint8_t c = best;
        if (step < uniform) {
            const auto& from = !ascii.empty() && rng() % 2 ? ascii : ok;
            c = from[rng() % from.size()];
        } else {
            EXPECT_EQ(best_rem + 1, before) << "min_remaining is not exact after: " << text;
        }
        EXPECT_TRUE(st.step(c));
        text += char(c);
    }
    ADD_FAILURE() << "no end: " << text;
    return text;
}

}  // namespace

TEST(JsonString, RandomWalksMatchStdRegex) {
    std::mt19937 rng(7);
    int walks = 0;
    for (const WalkSchema& w : kWalks) {
        const auto g = schema(w.schema);
        std::wregex re;
        if (w.pattern) {
            const std::u32string p = code_points(w.pattern);
            re = std::wregex(std::wstring(p.begin(), p.end()), std::regex::ECMAScript);
        }
        for (int k = 0; k < 200; ++k) {
            const std::string text = byte_walk(g, rng, int(rng() % 80));
            json v;
            ASSERT_NO_THROW(v = json::parse(text)) << text;
            ASSERT_TRUE(v.is_string()) << text;
            const std::u32string cps = code_points(v.get<std::string>());
            EXPECT_GE(int(cps.size()), w.min_len) << w.schema << " " << text;
            if (w.max_len >= 0) {
                EXPECT_LE(int(cps.size()), w.max_len) << w.schema << " " << text;
            }
            if (w.pattern) {
                EXPECT_TRUE(std::regex_search(std::wstring(cps.begin(), cps.end()), re))
                    << w.pattern << " " << text;
            }
            if (k == 0) std::printf("%s -> %s\n", w.schema, text.c_str());
            ++walks;
        }
    }
    std::printf("%d walks\n", walks);
}
