// Grammar masking on real vocabularies (stories260K: 512 tokens; llama3: 128256): random walks
// that pick uniformly among the allowed tokens always end in text that nlohmann::json::parse
// accepts and that matches the schema (checked by a small validator written here, independent of
// the matcher; string keywords through std::wregex and a calendar check), for 10 schemas; an
// end-of-generation token is allowed exactly when the text is complete; the fast mask (first-byte
// buckets, plain-string shortcut) agrees with checking tokens one by one, and inside strings under
// pattern / format / length limits the full mask equals the state's own verdict on every llama3
// token. Also prints the time of one mask in a few typical states.
//
// A uniform walk can wander for a long time inside a string or an open array, so after
// kUniformSteps tokens the walk closes the output: it picks the allowed token after which
// GrammarState::min_remaining() is smallest (which must shrink at every step); it still picks only
// allowed tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "common/error.h"
#include "gguf/gguf.h"
#include "grammar_test_util.h"
#include "sampling/constraints.h"
#include "sampling/grammar_vocab.h"
#include "sampling/json_grammar.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

using namespace specula;
using json = nlohmann::json;

namespace {

const int kUniformSteps = 120;
const int kMaxSteps = 4000;

using Vocab = test::GrammarTestVocab;

const Vocab& vocab(const std::string& rel) {
    return test::grammar_vocab(rel);
}

// Code points of UTF-8 text.
std::wstring code_points(const std::string& s) {
    std::wstring out;
    for (size_t i = 0; i < s.size();) {
        const uint8_t c = uint8_t(s[i]);
        const int n = c < 0x80 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
        wchar_t cp = n == 0 ? c : c & (0x3F >> n);
        for (int k = 1; k <= n; ++k) cp = wchar_t(cp << 6 | (uint8_t(s[i + size_t(k)]) & 0x3F));
        out.push_back(cp);
        i += size_t(n) + 1;
    }
    return out;
}

// A real calendar date YYYY-MM-DD (leap years included).
bool is_date(const std::string& t) {
    int y, m, d;
    char tail;
    if (t.size() != 10 || t[4] != '-' || t[7] != '-' ||
        std::sscanf(t.c_str(), "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3)
        return false;
    for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
        if (!std::isdigit(uint8_t(t[i]))) return false;
    const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1];
}

// minLength / maxLength / pattern (std::wregex, ECMAScript, searched) / format date.
bool string_matches(const std::string& str, const json& s) {
    const std::wstring cps = code_points(str);
    if (cps.size() < s.value("minLength", size_t(0))) return false;
    if (s.contains("maxLength") && cps.size() > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern")) {
        const std::wstring p = code_points(s["pattern"].get<std::string>());
        if (!std::regex_search(cps, std::wregex(p, std::regex::ECMAScript))) return false;
    }
    if (s.value("format", "") == "date" && !is_date(str)) return false;
    return true;
}

// The schema subset, checked directly on a parsed value.
bool matches(const json& v, const json& s) {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("const")) return v == s["const"];
    for (const char* k : {"anyOf", "oneOf"}) {
        if (!s.contains(k)) continue;
        int n = 0;
        for (const json& b : s[k]) n += matches(v, b);
        return k[0] == 'a' ? n >= 1 : n == 1;
    }
    if (s.contains("enum")) {
        for (const json& e : s["enum"])
            if (v == e) return true;
        return false;
    }
    if (s.contains("type")) {
        const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
        bool ok = false;
        for (const json& t : types) {
            const std::string n = t;
            ok |= (n == "object" && v.is_object()) || (n == "array" && v.is_array()) ||
                  (n == "string" && v.is_string()) || (n == "number" && v.is_number()) ||
                  (n == "integer" && v.is_number_integer()) || (n == "boolean" && v.is_boolean()) ||
                  (n == "null" && v.is_null());
        }
        if (!ok) return false;
    }
    if (v.is_object()) {
        const json props = s.value("properties", json::object());
        for (const json& r : s.value("required", json::array()))
            if (!v.contains(r.get<std::string>())) return false;
        for (const auto& [k, x] : v.items()) {
            if (props.contains(k)) {
                if (!matches(x, props[k])) return false;
            } else if (s.contains("additionalProperties") &&
                       !matches(x, s["additionalProperties"])) {
                return false;
            }
        }
    }
    if (v.is_string() && !string_matches(v.get<std::string>(), s)) return false;
    if (v.is_array()) {
        if (v.size() < s.value("minItems", size_t(0))) return false;
        if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
        if (s.contains("items"))
            for (const json& x : v)
                if (!matches(x, s["items"])) return false;
    }
    return true;
}

const char* kSchemas[] = {
    R"({"type": "object"})",
    R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
        "required": ["name", "age"], "additionalProperties": false})",
    R"({"type": "object", "properties": {"points": {"type": "array", "minItems": 1, "items":
        {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
         "required": ["x", "y"], "additionalProperties": false}}},
        "required": ["points"], "additionalProperties": false})",
    R"({"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]},
        "size": {"enum": [1, 12, 3.5, null]}, "flag": {"const": true},
        "shape": {"const": {"kind": "circle", "r": [1, 2]}}},
        "required": ["color", "flag"], "additionalProperties": false})",
    R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
        "additionalProperties": {"type": "number"}})",
    R"({"type": "object", "properties": {"a": {"type": ["string", "null"]},
        "b": {"type": ["integer", "boolean"]}, "c": {}}, "required": ["a", "b", "c"]})",
    R"({"type": "array", "items": {"enum": ["yes", "no", "maybe"]}, "minItems": 2,
        "maxItems": 4})",
    R"({"type": "object", "properties": {"l1": {"type": "object", "properties": {"l2":
        {"type": "object", "properties": {"m": {"type": "array", "items": {"type": "array",
         "items": {"type": "integer"}}}}, "required": ["m"], "additionalProperties": false}},
        "required": ["l2"], "additionalProperties": false}}, "required": ["l1"],
        "additionalProperties": false})",
    R"({"type": "object", "properties": {"nick": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "v": {"oneOf": [{"type": "integer"}, {"enum": ["auto", true]},
              {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}]}},
        "required": ["nick", "v"], "additionalProperties": false})",
    R"({"type": "object", "properties": {"id": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3,5}$"},
        "day": {"type": "string", "format": "date"},
        "nick": {"type": "string", "minLength": 2, "maxLength": 5},
        "note": {"type": "string", "pattern": "ok|fine", "maxLength": 12},
        "free": {"type": "string", "pattern": "ok", "minLength": 4}},
        "required": ["id", "day", "nick", "note"], "additionalProperties": false})",
};

// Picks the next token: uniform among the allowed for the first kUniformSteps, then the allowed
// token after which the fewest bytes complete the output (an end token as soon as allowed).
int32_t pick(const Vocab& v, const GrammarState& st, const std::vector<uint8_t>& allowed, int step,
             std::mt19937& rng) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < allowed.size(); ++i)
        if (allowed[i]) ids.push_back(int32_t(i));
    EXPECT_FALSE(ids.empty()) << "a dead end";
    if (ids.empty()) return -1;
    if (step < kUniformSteps) return ids[rng() % ids.size()];
    for (int32_t e : v.tok->eog_ids())
        if (allowed[size_t(e)]) return e;
    const size_t before = st.min_remaining();
    int32_t best = -1;
    size_t best_rem = SIZE_MAX;
    GrammarState s(st);
    for (int32_t id : ids) {
        s = st;
        EXPECT_TRUE(v.gv->accept(s, id));
        const size_t r = s.min_remaining();
        if (r < best_rem) best_rem = r, best = id;
    }
    EXPECT_LT(best_rem, before) << "no allowed token gets closer to the end";
    return best;
}

// One walk; returns the text (or fails the test).
std::string walk(const Vocab& v, const std::shared_ptr<const JsonGrammar>& g, uint32_t seed,
                 bool check_each) {
    std::mt19937 rng(seed);
    GrammarState st(g);
    std::vector<uint8_t> allowed;
    std::string text;
    for (int step = 0; step < kMaxSteps; ++step) {
        v.gv->allowed(st, allowed);
        for (int32_t e : v.tok->eog_ids())
            EXPECT_EQ(allowed[size_t(e)] != 0, st.can_end()) << "EOG after: " << text;
        if (check_each) {  // the fast mask agrees with one-by-one checks (a sample of tokens)
            for (int k = 0; k < 64; ++k) {
                const int32_t id = int32_t(rng() % uint32_t(v.gv->n_vocab()));
                EXPECT_EQ(allowed[size_t(id)] != 0, v.gv->allows(st, id)) << id << " " << text;
            }
        }
        const int32_t id = pick(v, st, allowed, step, rng);
        if (id < 0) return text;
        EXPECT_TRUE(v.gv->accept(st, id));
        if (v.tok->is_eog(id)) return text;
        text += v.gv->piece(id);
    }
    ADD_FAILURE() << "no end after " << kMaxSteps << " tokens: " << text.substr(0, 300);
    return text;
}

void walks(const std::string& rel, int per_schema, bool check_each) {
    const Vocab& v = vocab(rel);
    int total = 0;
    size_t bytes = 0;
    for (size_t si = 0; si < std::size(kSchemas); ++si) {
        const json schema = json::parse(kSchemas[si]);
        const auto g = si == 0 ? json_object_grammar() : json_schema_grammar(schema);
        for (int w = 0; w < per_schema; ++w) {
            const std::string text = walk(v, g, uint32_t(1000 * si + w), check_each);
            json parsed;
            try {
                parsed = json::parse(text);
            } catch (const std::exception& e) {
                ADD_FAILURE() << "schema " << si << ": does not parse (" << e.what()
                              << "): " << text.substr(0, 300);
                continue;
            }
            EXPECT_TRUE(matches(parsed, schema)) << "schema " << si << ": " << text;
            ++total;
            bytes += text.size();
            if (w == 0) std::printf("schema %zu: %.200s\n", si, text.c_str());
        }
    }
    std::printf("%s: %d walks, %.0f bytes on average\n", rel.c_str(), total,
                double(bytes) / std::max(total, 1));
}

// ns per mask in the state after `prefix`.
double mask_ns(const Vocab& v, const std::shared_ptr<const JsonGrammar>& g, const char* prefix) {
    GrammarState st(g);
    EXPECT_TRUE(st.advance(prefix)) << prefix;
    std::vector<float> row(size_t(v.gv->n_vocab()), 0.f);
    const int reps = v.gv->n_vocab() > 10000 ? 50 : 5000;
    v.gv->mask(st, row.data());
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) v.gv->mask(st, row.data());
    const auto t1 = std::chrono::steady_clock::now();
    int n_allowed = 0;
    for (float x : row) n_allowed += x == 0.f;
    EXPECT_GT(n_allowed, 0) << prefix;
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / reps;
}

void timings(const std::string& rel) {
    const Vocab& v = vocab(rel);
    const auto any = json_object_grammar();
    const auto person = json_schema_grammar(json::parse(kSchemas[1]));
    const auto coded = json_schema_grammar(json::parse(kSchemas[std::size(kSchemas) - 1]));
    struct Case {
        const char* what;
        const std::shared_ptr<const JsonGrammar>* g;
        const char* prefix;
    } cases[] = {{"object start", &any, "{"},
                 {"in a string", &any, "{\"key\": \"some text"},
                 {"after a value", &any, "{\"a\": [1, 2"},
                 {"in a number", &any, "{\"a\": 12"},
                 {"schema key", &person, "{\"na"},
                 {"schema value", &person, "{\"age\": "},
                 {"pattern string", &coded, "{\"id\": \"AB-1"},
                 {"date string", &coded, "{\"day\": \"2024-"},
                 {"searched string", &coded, "{\"note\": \"x"},
                 {"search open", &coded, "{\"free\": \"xo"},
                 {"search matched", &coded, "{\"free\": \"xxokx"}};
    for (const Case& c : cases)
        std::printf("%s (%d tokens): mask %-14s %9.0f ns\n", rel.c_str(), v.gv->n_vocab(), c.what,
                    mask_ns(v, *c.g, c.prefix));
}

}  // namespace

TEST(GrammarVocab, RandomWalksOnStories260KParseAndMatch) {
    walks("models/tinystories/stories260K.gguf", 25, true);
}

TEST(GrammarVocab, RandomWalksOnLlama3ParseAndMatch) {
    walks("vocab/ggml-vocab-llama3.gguf", 3, true);
}

TEST(GrammarVocab, TokenKindsAndDraftChecks) {
    const Vocab& v = vocab("models/tinystories/stories260K.gguf");
    const auto g = json_object_grammar();
    GrammarState st(g);
    const int32_t eos = v.tok->eos(), bos = v.tok->bos();
    EXPECT_EQ(v.gv->kind(eos), GrammarVocab::kEog);
    EXPECT_EQ(v.gv->kind(bos), GrammarVocab::kNever);
    EXPECT_FALSE(v.gv->allows(st, eos));
    EXPECT_FALSE(v.gv->allows(st, bos));
    // A drafted sequence: check each token on a copy, roll back on the first refusal.
    const std::vector<int32_t> draft = v.tok->encode("{\"a\": 1}", false, false);
    GrammarState spec = st;
    size_t kept = 0;
    for (int32_t t : draft) {
        if (!v.gv->accept(spec, t)) break;
        ++kept;
    }
    EXPECT_EQ(kept, draft.size());
    EXPECT_TRUE(spec.can_end());
    EXPECT_TRUE(v.gv->allows(spec, eos));
    const std::vector<int32_t> bad = v.tok->encode("{\"a\" 1}", false, false);
    GrammarState spec2 = st;
    kept = 0;
    for (int32_t t : bad) {
        if (!v.gv->accept(spec2, t)) break;
        ++kept;
    }
    EXPECT_LT(kept, bad.size());
    EXPECT_THROW(v.gv->allows(st, v.gv->n_vocab()), Error);
}

// Inside strings under minLength / maxLength / pattern / format, the mask (no plain-string
// shortcut there) admits exactly the tokens whose bytes the state accepts, over all of llama3.
TEST(GrammarVocab, ConstrainedStringMasksEqualTheState) {
    const Vocab& v = vocab("vocab/ggml-vocab-llama3.gguf");
    const auto g = json_schema_grammar(json::parse(kSchemas[std::size(kSchemas) - 1]));
    // With `plain`: where the mask takes the plain-string shortcut (no pattern left to enforce:
    // none, or a searched one that has matched, or one whose leading .* is open with no
    // maxLength; maxLength bans the tokens too long).
    const std::pair<const char*, bool> prefixes[] = {{R"({"day": ")", false},
                                                     {R"({"day": "2024-0)", false},
                                                     {R"({"day": "2024-02-2)", false},
                                                     {R"({"id": "A)", false},
                                                     {R"({"id": "AB-12)", false},
                                                     {R"({"nick": "\u00)", false},
                                                     {R"({"nick": "ab\)", false},
                                                     {R"({"nick": "abcd)", true},
                                                     {R"({"nick": ")", true},
                                                     {R"({"note": "xok)", true},
                                                     {R"({"note": "xxxxxxxxxx)", false},
                                                     {"{\"nick\": \"\xE2\x82", false},
                                                     {R"({"free": ")", true},
                                                     {R"({"free": "o)", true},
                                                     {R"({"free": "ok)", true},
                                                     {R"({"free": "x\u006fk)", true},
                                                     {R"({"free": "xxokx)", true}};
    std::vector<uint8_t> allowed;
    for (const auto& [prefix, plain] : prefixes) {
        GrammarState st(g);
        ASSERT_TRUE(st.advance(prefix)) << prefix;
        EXPECT_EQ(st.in_plain_string(), plain) << prefix;
        v.gv->allowed(st, allowed);
        int n_allowed = 0;
        for (int32_t id = 0; id < v.gv->n_vocab(); ++id) {
            bool expect = false;
            if (v.gv->kind(id) == GrammarVocab::kText) {
                GrammarState s(st);
                expect = s.advance(v.gv->piece(id));
            } else if (v.gv->kind(id) == GrammarVocab::kEog) {
                expect = st.can_end();
            }
            EXPECT_EQ(allowed[size_t(id)] != 0, expect) << prefix << " token " << id;
            n_allowed += expect;
        }
        EXPECT_GT(n_allowed, 0) << prefix;
        std::printf("%-22s %6d tokens allowed\n", prefix, n_allowed);
    }
}

TEST(GrammarVocab, MaskTimings) {
    timings("models/tinystories/stories260K.gguf");
    timings("vocab/ggml-vocab-llama-spm.gguf");
    timings("vocab/ggml-vocab-llama3.gguf");
    timings("vocab/ggml-vocab-qwen3.gguf");
}

TEST(Constraints, ApplyMarkRewindAndRefusals) {
    const Vocab& v = vocab("models/tinystories/stories260K.gguf");
    const int nv = v.gv->n_vocab();
    const int32_t open = v.byte_token[uint8_t('{')], close = v.byte_token[uint8_t('}')];
    const int32_t quote = v.byte_token[uint8_t('"')];
    ASSERT_GE(open, 0);
    ASSERT_GE(close, 0);
    ASSERT_GE(quote, 0);
    PenaltyParams pp;
    pp.frequency_penalty = 1.f;
    pp.logit_bias = {{close, 0.5f}};
    Constraints c(pp, nv, json_object_grammar(), v.gv);
    c.push_prompt(std::vector<int32_t>{open, open});  // penalised, not matched
    const std::vector<float> zeros(size_t(nv), 0.f);
    std::vector<float> scratch;
    const float* row = c.apply(zeros.data(), scratch);
    EXPECT_EQ(row[open], -2.f);        // allowed at the start, penalised twice
    EXPECT_EQ(row[close], -INFINITY);  // '}' cannot start the output
    EXPECT_EQ(row[v.tok->eos()], -INFINITY);
    const Constraints::Mark m = c.mark();
    EXPECT_FALSE(c.accept(close));  // refused: nothing changes
    EXPECT_EQ(c.penalties().size(), 2u);
    ASSERT_TRUE(c.accept(open));
    row = c.apply(zeros.data(), scratch);
    EXPECT_EQ(row[close], 0.5f);  // allowed now, biased
    EXPECT_EQ(row[open], -INFINITY);
    EXPECT_EQ(row[quote], 0.f);
    ASSERT_TRUE(c.accept(close));
    EXPECT_TRUE(c.can_end());
    EXPECT_TRUE(c.allows(v.tok->eos()));
    c.rewind(m);
    EXPECT_FALSE(c.can_end());
    EXPECT_EQ(c.penalties().size(), 2u);
    EXPECT_EQ(c.apply(zeros.data(), scratch)[close], -INFINITY);
    // Nothing active: the row itself, no copy.
    Constraints none(PenaltyParams{}, nv);
    EXPECT_FALSE(none.active());
    EXPECT_EQ(none.apply(zeros.data(), scratch), zeros.data());
    EXPECT_THROW(Constraints(pp, nv + 1, json_object_grammar(), v.gv), Error);
    EXPECT_THROW(Constraints(pp, nv, json_object_grammar(), nullptr), Error);
}
