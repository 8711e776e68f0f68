// What one schema may cost (json_grammar.h): `$ref` targets compiled once and shared, so the
// hostile schemas of issue 45 (8 properties x 8 levels of $defs, each property a $ref to the next
// level: 16M nodes when unfolded; and 5 x 64) compile small and fast or are refused quickly; the
// caps on nodes, string tables and compile time refuse with the limit named; a shared node keeps
// the depth rule and the shortest completion (min_remaining) of the unfolded tree.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/clock.h"
#include "common/error.h"
#include "grammar_test_util.h"
#include "sampling/grammar_state.h"
#include "sampling/json_grammar.h"

using namespace specula;
using json = nlohmann::json;

namespace {

// `levels` $defs L0..L{levels-1}, each an object of `props` required properties that all refer
// to the next level; the last level's properties are strings. The root refers to L0.
json ladder(int props, int levels) {
    json defs = json::object();
    for (int l = 0; l < levels; ++l) {
        json p = json::object(), req = json::array();
        for (int i = 0; i < props; ++i) {
            const std::string name = "p" + std::to_string(i);
            p[name] = l + 1 < levels ? json{{"$ref", "#/$defs/L" + std::to_string(l + 1)}}
                                     : json{{"type", "string"}};
            req.push_back(name);
        }
        defs["L" + std::to_string(l)] = {{"type", "object"}, {"properties", p}, {"required", req}};
    }
    return {{"$defs", defs}, {"$ref", "#/$defs/L0"}};
}

struct Timed {
    std::shared_ptr<const JsonGrammar> g;
    std::string error;
    double ms = 0;
};

Timed compile(const json& schema, const JsonGrammarOptions& opt = {}) {
    Timed t;
    const auto t0 = clock_type::now();
    try {
        t.g = json_schema_grammar(schema, opt);
    } catch (const Error& e) {
        t.error = e.what();
    }
    t.ms = ms_since(t0);
    return t;
}

// n objects of `props` string properties each, in groups of 50 under the root (an object has
// at most 64 properties): 1 + n * (props + 1) + ceil(n / 50) + 1 nodes.
json wide(int n, int props) {
    json groups = json::object();
    for (int i = 0; i < n; ++i) {
        json q = json::object();
        for (int k = 0; k < props; ++k) q["s" + std::to_string(k)] = {{"type", "string"}};
        json& g = groups["g" + std::to_string(i / 50)];
        if (g.is_null()) g = {{"type", "object"}, {"properties", json::object()}};
        g["properties"]["o" + std::to_string(i)] = {{"type", "object"}, {"properties", q}};
    }
    return {{"type", "object"}, {"properties", groups}};
}

}  // namespace

TEST(GrammarBounds, SharedRefLadderCompilesSmallAndFast) {
    const Timed t = compile(ladder(8, 8));
    ASSERT_TRUE(t.g) << t.error;
    // node 0 (any), 8 strings, 8 levels, the root's $ref is L0 itself
    EXPECT_EQ(t.g->nodes.size(), 1u + 8u + 8u);
    EXPECT_LT(t.ms, 200.0);
    // The unfolded value: 8^8 strings; min_remaining counts them all, without recursion.
    GrammarState st(t.g);
    const auto t0 = clock_type::now();
    const size_t need = st.min_remaining();
    EXPECT_LT(ms_since(t0), 50.0);
    EXPECT_GT(need, size_t(16777216) * 2);  // at least "" per leaf
    EXPECT_LE(need, kMaxMinLen * 4);
    // It still checks the text: a leaf level written out is accepted.
    EXPECT_TRUE(
        st.advance("{\"p0\": {\"p0\": {\"p0\": {\"p0\": {\"p0\": {\"p0\": {\"p0\": {\"p0\": "));
    EXPECT_TRUE(st.advance("\"x\""));
    EXPECT_FALSE(st.advance("}"));  // p1..p7 are required
}

TEST(GrammarBounds, DeepLadderRefusedQuicklyByDepth) {
    const Timed t = compile(ladder(5, 64));
    EXPECT_FALSE(t.g);
    EXPECT_NE(t.error.find("nested deeper than 16 levels"), std::string::npos) << t.error;
    EXPECT_LT(t.ms, 200.0);
}

TEST(GrammarBounds, SharedTargetUsedDeeperKeepsTheDepthRule) {
    // L has 3 levels below it; first used at depth 1 ("a_near"), then shared at depth 3 (through
    // "deep"), where it reaches depth 6: max_depth 6 refuses it there, 7 admits it.
    const json s = json::parse(R"({
      "$defs": {"L": {"type": "object", "properties": {"a": {"type": "object", "properties": {
                 "b": {"type": "array", "items": {"type": "string"}}}}}}},
      "type": "object",
      "properties": {
        "a_near": {"$ref": "#/$defs/L"},
        "deep": {"type": "object", "properties": {"x": {"type": "object", "properties": {
                   "y": {"$ref": "#/$defs/L"}}}}}}})");
    JsonGrammarOptions opt;
    opt.max_depth = 6;
    const Timed t = compile(s, opt);
    EXPECT_FALSE(t.g);
    EXPECT_NE(t.error.find("nested deeper than 6 levels at /properties/deep/properties/x/"
                           "properties/y (through '$ref' \"#/$defs/L\")"),
              std::string::npos)
        << t.error;
    opt.max_depth = 7;
    const Timed ok = compile(s, opt);
    ASSERT_TRUE(ok.g) << ok.error;
    // the shared target is one set of nodes: any, string, array, a-object, L, x, deep, root
    EXPECT_EQ(ok.g->nodes.size(), 8u);
}

TEST(GrammarBounds, NodeCapRefusesNamingTheLimit) {
    const Timed big = compile(wide(300, 60));  // 18308 nodes > 16384
    EXPECT_FALSE(big.g);
    EXPECT_NE(big.error.find("more than 16384 nodes (the limit on a schema's size"),
              std::string::npos)
        << big.error;
    EXPECT_LT(big.ms, 1000.0);
    JsonGrammarOptions opt;
    opt.max_nodes = 91;
    EXPECT_NE(compile(wide(9, 10), opt).error.find("more than 91 nodes"), std::string::npos);
    const Timed fits = compile(wide(8, 10), opt);  // 1 + 8 * 11 + 1 + 1 = 91
    ASSERT_TRUE(fits.g) << fits.error;
    EXPECT_EQ(fits.g->nodes.size(), 91u);
}

TEST(GrammarBounds, StringTablesAndCompileTimeAreCapped) {
    json p = json::object();
    for (int i = 0; i < 12; ++i)
        p["s" + std::to_string(i)] = {
            {"type", "string"}, {"pattern", "^[a-z]{2}x*$"}, {"maxLength", 100000}};
    const json s = {{"type", "object"}, {"properties", p}};
    const Timed t = compile(s);
    EXPECT_FALSE(t.g);
    EXPECT_NE(t.error.find("cells (the limit on a schema's minLength / maxLength / pattern"),
              std::string::npos)
        << t.error;
    JsonGrammarOptions opt;
    opt.max_compile_ms = 1;
    const Timed slow = compile(wide(250, 60), opt);  // 15257 nodes: well over 1 ms
    EXPECT_FALSE(slow.g);
    EXPECT_NE(slow.error.find("took over 1 ms (the limit on a schema's compile time)"),
              std::string::npos)
        << slow.error;
}

TEST(GrammarBounds, MinLengthsSaturate) {
    // 64 required properties per level, 15 levels of refs: 64^15 leaves, far past 2^64.
    const Timed t = compile(ladder(64, 15));
    ASSERT_TRUE(t.g) << t.error;
    EXPECT_EQ(t.g->nodes[size_t(t.g->root)].min_len, kMaxMinLen);
    GrammarState st(t.g);
    EXPECT_GE(st.min_remaining(), kMaxMinLen);
    EXPECT_LT(st.min_remaining(), kMaxMinLen * 1024);
    // An array of 2^31 - 1 such values still saturates rather than wrapping.
    const json arr = {{"$defs", ladder(64, 14)["$defs"]},
                      {"type", "array"},
                      {"items", {{"$ref", "#/$defs/L0"}}},
                      {"minItems", 2147483647}};
    const Timed a = compile(arr);
    ASSERT_TRUE(a.g) << a.error;
    GrammarState sa(a.g);
    EXPECT_GE(sa.min_remaining(), kMaxMinLen);
    EXPECT_TRUE(sa.advance("["));
    EXPECT_GE(sa.min_remaining(), kMaxMinLen);
}
