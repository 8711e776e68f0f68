// What a JSON grammar forces (GrammarState::forced_bytes) and the tokens that spell it
// (GrammarVocab::forced_tokens), on real schemas and the stories260K / llama2xs vocabularies:
//  - a schema with one property forces `"name":"` after `{`; an enum with one candidate left the
//    rest of it; a const the whole value; nested objects their keys and closings; the end token
//    once the JSON is closed; nothing inside free text, where two ways go on, or where the output
//    may end;
//  - every forced byte is the only byte (apart from whitespace between JSON tokens) that step()
//    accepts there, checked by trying all 256 bytes independently of forced_bytes();
//  - forced tokens spell exactly a prefix of the forced bytes, each one allowed in turn; on a toy
//    vocabulary, the longest piece wins and a token that is the only one allowed is forced;
//  - along random walks over 6 schemas, whenever forced_bytes() is non-empty the walk's own
//    allowed-token set agrees: every allowed token starts with a forced byte or is whitespace.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "gguf/gguf.h"
#include "grammar_test_util.h"
#include "sampling/grammar_vocab.h"
#include "sampling/json_grammar.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

using namespace specula;
using json = nlohmann::json;

namespace {

std::shared_ptr<const JsonGrammar> schema(const char* s) {
    return json_schema_grammar(json::parse(s));
}

// The state after `text` (which the grammar must accept).
GrammarState after(const std::shared_ptr<const JsonGrammar>& g, std::string_view text) {
    GrammarState st(g);
    EXPECT_TRUE(st.advance(text)) << text;
    return st;
}

std::string forced(const std::shared_ptr<const JsonGrammar>& g, std::string_view text,
                   size_t max_len = 256) {
    std::string out;
    after(g, text).forced_bytes(out, max_len);
    return out;
}

bool is_ws(int c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// The bytes step() accepts in `st`, other than whitespace.
std::vector<int> legal_non_ws(const GrammarState& st) {
    std::vector<int> v;
    for (int c = 0; c < 256; ++c) {
        GrammarState p(st);
        if (!is_ws(c) && p.step(uint8_t(c))) v.push_back(c);
    }
    return v;
}

using Vocab = test::GrammarTestVocab;

const Vocab& vocab(const std::string& rel) {
    return test::grammar_vocab(rel);
}

const char* kAnswer =
    R"({"type":"object","properties":{"answer_to_the_question":{"type":"string"}},)"
    R"("required":["answer_to_the_question"],"additionalProperties":false})";

TEST(GrammarForced, SchemasForceWhatTheyFix) {
    const auto one = schema(kAnswer);
    EXPECT_EQ(forced(one, ""), "{\"answer_to_the_question\":\"");
    EXPECT_EQ(forced(one, "{"), "\"answer_to_the_question\":\"");
    EXPECT_EQ(forced(one, "{\n  "), "\"answer_to_the_question\":\"");
    EXPECT_EQ(forced(one, "{\"answer_to"), "_the_question\":\"");
    EXPECT_EQ(forced(one, "{\"answer_to_the_question\" :"), "\"");
    EXPECT_EQ(forced(one, "{\"answer_to_the_question\":\"x"), "") << "free text";
    EXPECT_EQ(forced(one, "{\"answer_to_the_question\":\"x\""), "}");
    EXPECT_EQ(forced(one, "{\"answer_to_the_question\":\"x\"}"), "") << "the end may follow";
    EXPECT_EQ(forced(one, "{", 5), "\"answ") << "max_len";

    // An enum: forced once one candidate is left; a const: all of it.
    const auto colors =
        schema(R"({"type":"object","properties":{"color":{"enum":["red","green","grey"]}},)"
               R"("required":["color"],"additionalProperties":false})");
    EXPECT_EQ(forced(colors, "{"), "\"color\":\"");
    EXPECT_EQ(forced(colors, "{\"color\":\""), "");     // red, green or grey
    EXPECT_EQ(forced(colors, "{\"color\":\"g"), "re");  // green or grey
    EXPECT_EQ(forced(colors, "{\"color\":\"gre"), "");
    EXPECT_EQ(forced(colors, "{\"color\":\"gree"), "n\"}");
    EXPECT_EQ(forced(colors, "{\"color\":\"r"), "ed\"}");
    EXPECT_EQ(forced(schema(R"({"const":{"a":[1,true]}})"), ""), R"({"a":[1,true]})");
    EXPECT_EQ(forced(schema(R"({"const":12})"), "1"), "2");
    EXPECT_EQ(forced(schema(R"({"const":12})"), "12"), "") << "complete";

    // Nested: the inner object's key after the outer one's, the closings after the last value.
    const auto nested = schema(
        R"({"type":"object","properties":{"outer":{"type":"object","properties":)"
        R"({"inner":{"type":"boolean"}},"required":["inner"],"additionalProperties":false}},)"
        R"("required":["outer"],"additionalProperties":false})");
    EXPECT_EQ(forced(nested, ""), R"({"outer":{"inner":)");
    EXPECT_EQ(forced(nested, R"({"outer":{"inner":t)"), "rue}}");
    EXPECT_EQ(forced(nested, R"({"outer":{"inner":)"), "") << "true or false";

    // Two properties, neither required: two keys (or `}`) may come first.
    const auto two =
        schema(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},)"
               R"("additionalProperties":false})");
    EXPECT_EQ(forced(two, "{"), "");
    EXPECT_EQ(forced(two, "{\"a\":1,"), "\"b\":");
    // Free-form JSON and free strings force nothing (but the opening brace of json_object).
    EXPECT_EQ(forced(json_object_grammar(), ""), "{");
    EXPECT_EQ(forced(json_object_grammar(), "{"), "");
    EXPECT_EQ(forced(schema(R"({"type":"string"})"), ""), "\"");
    EXPECT_EQ(forced(schema(R"({"type":"string"})"), "\"ab"), "");
    // An additional key may start like a named one: nothing forced.
    EXPECT_EQ(forced(schema(R"({"type":"object","properties":{"k":{}},"required":["k"],)"
                            R"("additionalProperties":true})"),
                     "{"),
              "\"");
    // Without additionalProperties an object naming its properties is closed: the key is forced.
    EXPECT_EQ(forced(schema(R"({"type":"object","properties":{"k":{}},"required":["k"]})"), "{"),
              "\"k\":");
}

// Each forced byte is the only non-whitespace byte step() accepts, and the output cannot end.
TEST(GrammarForced, EveryForcedByteIsTheOnlyOne) {
    const auto g = schema(kAnswer);
    for (const char* prefix : {"", "{", "{\"ans", "{\"answer_to_the_question\":\"x\""}) {
        GrammarState st = after(g, prefix);
        std::string f;
        st.forced_bytes(f, 256);
        ASSERT_FALSE(f.empty()) << prefix;
        for (char c : f) {
            EXPECT_FALSE(st.can_end());
            EXPECT_EQ(legal_non_ws(st), std::vector<int>{uint8_t(c)}) << prefix;
            ASSERT_TRUE(st.step(uint8_t(c)));
        }
        // Where it stopped, two bytes are legal or the output may end.
        EXPECT_TRUE(st.can_end() || legal_non_ws(st).size() >= 2) << prefix;
    }
}

TEST(GrammarForced, ForcedTokensSpellTheForcedBytes) {
    for (const char* rel :
         {"models/tinystories/stories260K.gguf", "models/tinystories/llama2xs.gguf"}) {
        const GrammarVocab& gv = *vocab(rel).gv;
        const auto g = schema(kAnswer);
        GrammarState st(g);
        std::string bytes, fb;
        st.forced_bytes(fb, 256);
        std::vector<int32_t> toks;
        GrammarState walk(st);
        const int n = gv.forced_tokens(walk, 64, bytes, toks);
        ASSERT_EQ(n, int(toks.size()));
        ASSERT_GT(n, 0) << rel;
        std::string spelled;
        GrammarState check(st);
        for (int32_t t : toks) {
            ASSERT_EQ(gv.kind(t), GrammarVocab::kText);
            EXPECT_TRUE(gv.accept(check, t)) << rel;
            spelled += gv.piece(t);
        }
        EXPECT_EQ(spelled, fb) << rel << ": all of the forced bytes, in tokens";
        EXPECT_EQ(walk.n_bytes(), check.n_bytes()) << "st advanced past them";
        EXPECT_LT(size_t(n), fb.size()) << rel << ": some tokens span several bytes";
        std::printf("%s: %zu forced bytes in %d tokens\n", rel, fb.size(), n);

        // max_tokens bounds them.
        toks.clear();
        GrammarState w2(st);
        EXPECT_EQ(gv.forced_tokens(w2, 2, bytes, toks), 2);

        // Once the JSON is closed, the end-of-generation token is the only one allowed.
        GrammarState done = after(g, R"({"answer_to_the_question":"x"})");
        const int32_t eog = gv.only_token(done);
        ASSERT_GE(eog, 0);
        EXPECT_EQ(gv.kind(eog), GrammarVocab::kEog);
        toks.clear();
        EXPECT_EQ(gv.forced_tokens(done, 8, bytes, toks), 1);
        EXPECT_EQ(toks, std::vector<int32_t>{eog}) << "nothing after the end";
        // Free text forces nothing, neither bytes nor a single token.
        GrammarState text = after(g, R"({"answer_to_the_question":"x)");
        toks.clear();
        EXPECT_EQ(gv.forced_tokens(text, 8, bytes, toks), 0);
        EXPECT_EQ(gv.only_token(text), -1);
        EXPECT_EQ(gv.only_token(GrammarState(json_object_grammar())), -1)
            << "`{` and whitespace tokens";
    }
}

// A toy vocabulary: the longest piece inside the forced bytes wins, and where two bytes are legal
// but only one token spells either, that token is forced (only_token).
TEST(GrammarForced, TokenLevelForcing) {
    using K = GrammarVocab;
    const GrammarVocab gv({"{", "\"", "\"a\":", "1", "}", "a", ""},
                          {K::kText, K::kText, K::kText, K::kText, K::kText, K::kText, K::kEog});
    const auto g = schema(R"({"type":"object","properties":{"a":{"enum":[1,2]}},"required":["a"],)"
                          R"("additionalProperties":false})");
    GrammarState st(g);
    std::string fb, bytes;
    st.forced_bytes(fb, 64);
    EXPECT_EQ(fb, "{\"a\":");
    std::vector<int32_t> toks;
    EXPECT_EQ(gv.forced_tokens(st, 16, bytes, toks), 5);
    // `{`, `"a":` (not `"`), then 1 or 2 may follow, but only `1` is a token; `}`; the end.
    EXPECT_EQ(toks, (std::vector<int32_t>{0, 2, 3, 4, 6}));
    EXPECT_TRUE(st.can_end());
    GrammarState mid = after(g, "{\"a\":");
    EXPECT_EQ(gv.only_token(mid), 3);
    EXPECT_EQ(gv.longest_piece_prefix("\"a\":1"), 2);
    EXPECT_EQ(gv.longest_piece_prefix("\"b"), 1);
    EXPECT_EQ(gv.longest_piece_prefix("x"), -1);
}

// Random walks over allowed tokens: wherever bytes are forced, every allowed token begins with
// the first forced byte or with whitespace (the one option forced_bytes() leaves aside).
TEST(GrammarForced, RandomWalksAgreeWithTheMask) {
    const GrammarVocab& gv = *vocab("models/tinystories/stories260K.gguf").gv;
    const char* schemas[] = {
        kAnswer,
        R"({"type":"object","properties":{"color":{"enum":["red","green","grey"]},)"
        R"("n":{"const":3}},"required":["color","n"],"additionalProperties":false})",
        R"({"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"}},)"
        R"("required":["id"],"additionalProperties":false},"minItems":2,"maxItems":3})",
        R"({"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":)"
        R"("null"}},"required":["x"],"additionalProperties":false}},"required":["o"],)"
        R"("additionalProperties":false})",
        R"({"anyOf":[{"type":"string"},{"type":"null"}]})",
        R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"string"}},)"
        R"("required":["a","b"],"additionalProperties":false})",
    };
    std::mt19937 rng(5);
    std::vector<uint8_t> allowed;
    std::string fb;
    int checked = 0;
    for (const char* s : schemas) {
        const auto g = schema(s);
        for (int walk = 0; walk < 6; ++walk) {
            GrammarState st(g);
            for (int step = 0; step < 60 && !st.finished(); ++step) {
                st.forced_bytes(fb, 64);
                gv.allowed(st, allowed);
                std::vector<int32_t> ok;
                for (int32_t id = 0; id < gv.n_vocab(); ++id)
                    if (allowed[size_t(id)]) ok.push_back(id);
                ASSERT_FALSE(ok.empty());
                if (!fb.empty()) {
                    ++checked;
                    for (int32_t id : ok) {
                        ASSERT_EQ(gv.kind(id), GrammarVocab::kText) << s;
                        const uint8_t c0 = uint8_t(gv.piece(id)[0]);
                        EXPECT_TRUE(c0 == uint8_t(fb[0]) || is_ws(c0))
                            << s << ": token '" << gv.piece(id) << "' vs forced '" << fb << "'";
                    }
                }
                // Prefer closing once the walk is long (strings can go on forever).
                int32_t pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
                if (step > 30) {
                    size_t best = SIZE_MAX;
                    for (int32_t id : ok) {
                        GrammarState p(st);
                        if (gv.kind(id) != GrammarVocab::kText || !gv.accept(p, id)) continue;
                        if (p.min_remaining() < best) best = p.min_remaining(), pick = id;
                    }
                }
                if (gv.kind(pick) == GrammarVocab::kEog) break;
                ASSERT_TRUE(gv.accept(st, pick));
            }
        }
    }
    EXPECT_GT(checked, 50);
}

}  // namespace
