// JSON grammar matcher tests on hand-written texts: the json_object grammar and schema grammars
// accept what they should (complete or as a prefix) and refuse the rest at the right byte;
// whitespace, depth, number and UTF-8 limits; unsupported schema keywords are refused by name;
// snapshots (copies) roll back. Every accepted complete text is also checked with
// nlohmann::json::parse.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
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

void expect_complete(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
    EXPECT_EQ(run(g, text), -1) << text;
    EXPECT_NO_THROW((void)json::parse(text)) << text;
}

std::shared_ptr<const JsonGrammar> schema(const char* s) {
    return json_schema_grammar(json::parse(s));
}

std::string error_of(const char* s) {
    try {
        schema(s);
    } catch (const Error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST(JsonGrammar, ObjectAcceptsValidObjects) {
    const auto g = json_object_grammar();
    for (const char* t :
         {"{}", "{ }", "{\"a\":1}", "{\"a\": [1, 2.5, -0.5e-3, true, false, null]}",
          "{\"k\": {\"n\": {\"m\": \"v\"}}, \"x\": \"\"}",
          "{\"esc\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", "{\"u\": \"\\u00e9\\u20AC\"}",
          "{\"utf8\": \"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"}",
          "{\n  \"a\": 1,\n  \"b\": [\n    {}\n  ]\n}", " {\"a\":0}", "{\"\":1E+2}",
          "{\"a\":[],\"a\":{}}"})
        expect_complete(g, t);
}

TEST(JsonGrammar, ObjectRefusesAtTheRightByte) {
    const auto g = json_object_grammar();
    EXPECT_EQ(run(g, "[1]"), 0);  // top level must be an object
    EXPECT_EQ(run(g, "\"s\""), 0);
    EXPECT_EQ(run(g, "{a:1}"), 1);       // unquoted key
    EXPECT_EQ(run(g, "{\"a\" 1}"), 5);   // missing colon
    EXPECT_EQ(run(g, "{\"a\":1,}"), 7);  // trailing comma
    EXPECT_EQ(run(g, "{\"a\":01}"), 6);  // leading zero
    EXPECT_EQ(run(g, "{\"a\":1.}"), 7);  // no fraction digit
    EXPECT_EQ(run(g, "{\"a\":-}"), 6);
    EXPECT_EQ(run(g, "{\"a\":tru}"), 8);
    EXPECT_EQ(run(g, "{\"a\":nul1}"), 8);
    EXPECT_EQ(run(g, "{\"a\":\"x\ny\"}"), 7);  // raw control byte in a string
    EXPECT_EQ(run(g, "{\"a\":\"\\x\"}"), 7);   // bad escape
    EXPECT_EQ(run(g, "{\"a\":\"\\u12G4\"}"), 10);
    EXPECT_EQ(run(g, "{\"a\":\"\\uD83D\\uDE00\"}"), 9);    // surrogate escapes are not produced
    EXPECT_EQ(run(g, "{\"a\":\"\xC3\x28\"}"), 7);          // bad continuation byte
    EXPECT_EQ(run(g, "{\"a\":\"\xC0\xAF\"}"), 6);          // overlong lead
    EXPECT_EQ(run(g, "{\"a\":\"\xED\xA0\x80\"}"), 7);      // UTF-8 surrogate
    EXPECT_EQ(run(g, "{\"a\":\"\xF4\x90\x80\x80\"}"), 7);  // above U+10FFFF
    EXPECT_EQ(run(g, "{}x"), 2);                           // nothing after the value
    EXPECT_EQ(run(g, "{} "), 2);
    EXPECT_EQ(run(g, "{\"a\":[1 2]}"), 8);
    EXPECT_EQ(run(g, "{\"a\""), 1004);  // incomplete prefix
    EXPECT_EQ(run(g, "{\"a\":1"), 1006);
}

// Gaps as llama.cpp's grammars allow them: nothing, one space, or a newline and at most max_ws
// (default 20) spaces or tabs; numbers of at most 16 integer digits.
TEST(JsonGrammar, Limits) {
    JsonGrammarOptions opt;
    opt.max_ws = 3;
    opt.max_depth = 3;
    const auto g = json_object_grammar(opt);
    expect_complete(g, "{ \"a\" : 1 }");
    expect_complete(g, "{\n   \"a\":\n\t\t1\n}");
    EXPECT_EQ(run(g, "{\n    \"a\":1}"), 5);  // a fourth indent byte
    EXPECT_EQ(run(g, "{  \"a\":1}"), 2);      // a second space
    EXPECT_EQ(run(g, "{\n\n\"a\":1}"), 2);    // a second newline
    EXPECT_EQ(run(g, "{\t\"a\":1}"), 1);      // a gap starts with a space or a newline
    EXPECT_EQ(run(g, "{\r\n\"a\":1}"), 1);
    expect_complete(g, "{\"a\":[[1]]}");
    EXPECT_EQ(run(g, "{\"a\":[[[1]]]}"), 7);  // a fourth container
    expect_complete(g, "{\"a\":[[\"deep\"]]}");
    const auto dflt = json_object_grammar();
    expect_complete(dflt, "{\n" + std::string(20, ' ') + "\"a\": 1\n}");
    EXPECT_EQ(run(dflt, "{\n" + std::string(21, ' ') + "\"a\": 1\n}"), 22);
    expect_complete(dflt, "{\"a\":1234567890123456}");
    EXPECT_EQ(run(dflt, "{\"a\":12345678901234567}"), 21);  // 17 integer digits
    expect_complete(dflt, "{\"a\":1e99}");
    EXPECT_EQ(run(dflt, "{\"a\":1e999}"), 9);
}

// An object whose schema names its properties is closed unless additionalProperties says
// otherwise (llama.cpp, vLLM): opencode's tool schemas omit it. One that names none takes any key.
TEST(JsonGrammar, NamedPropertiesCloseTheObject) {
    const auto closed = schema(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
    expect_complete(closed, "{\"a\":1}");
    expect_complete(closed, "{}");
    EXPECT_EQ(run(closed, "{\"a\":1,\"b\":2}"), 6);  // no key can follow
    EXPECT_EQ(run(closed, "{\"b\":2}"), 2);
    const auto open = schema(
        R"({"type": "object", "properties": {"a": {"type": "integer"}},
            "additionalProperties": true})");
    expect_complete(open, "{\"a\":1,\"b\":[2]}");
    expect_complete(schema(R"({"type": "object"})"), "{\"b\":2}");
    const auto none = schema(R"({"type": "object", "properties": {}})");
    expect_complete(none, "{}");
    EXPECT_EQ(run(none, "{\"b\":2}"), 1);
}

TEST(JsonGrammar, SchemaObjectsWithRequiredAndClosedProperties) {
    const auto g = schema(R"({"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "nick": {"type": ["string", "null"]}},
        "required": ["name", "age"], "additionalProperties": false})");
    expect_complete(g, R"({"name": "Tom", "age": 3})");
    expect_complete(g, R"({"age": 3, "name": "Tom", "tags": ["a", "b"], "nick": null})");
    expect_complete(g, R"({"nick": "t", "name": "", "age": -12})");
    EXPECT_EQ(run(g, R"({"name": "Tom"})"), 14);                         // "age" is required
    EXPECT_EQ(run(g, R"({"name": "Tom", "name": "x", "age": 1})"), 18);  // duplicate key
    EXPECT_EQ(run(g, R"({"nam": 1})"), 5);                               // not a property
    EXPECT_EQ(run(g, R"({"namex": 1})"), 6);
    EXPECT_EQ(run(g, R"({"other": 1})"), 2);
    EXPECT_EQ(run(g, R"({"age": 1.5, "name": ""})"), 9);  // integer
    EXPECT_EQ(run(g, R"({"age": "1", "name": ""})"), 8);
    EXPECT_EQ(run(g, R"({"tags": ["a", "b", "c"], "age": 1, "name": ""})"), 18);  // maxItems
    EXPECT_EQ(run(g, R"({"nick": true})"), 9);
    EXPECT_EQ(run(g, R"({"n\u0061me": ""})"), 3);  // no escapes in keys here
}

// Nested models as pydantic writes them: $defs, and $ref to them (also inside anyOf, for an
// Optional nested model), and the older "definitions".
TEST(JsonGrammar, RefsIntoDefs) {
    const auto g = schema(R"({"$defs": {
        "Address": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"], "additionalProperties": false},
        "Kind": {"enum": ["home", "work"]}},
      "type": "object",
      "properties": {"home": {"$ref": "#/$defs/Address"},
                     "work": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
                     "kind": {"$ref": "#/$defs/Kind", "description": "which"}},
      "required": ["home", "kind"], "additionalProperties": false})");
    expect_complete(g, R"({"home": {"city": "Oslo"}, "kind": "home"})");
    expect_complete(g, R"({"home": {"city": "Oslo"}, "work": null, "kind": "work"})");
    expect_complete(g, R"({"kind": "work", "work": {"city": "A"}, "home": {"city": "B"}})");
    EXPECT_EQ(run(g, R"({"home": {"town": "Oslo"}})"), 11);  // Address has no "town"
    EXPECT_EQ(run(g, R"({"home": {"city": "O"}, "kind": "car"})"), 33);
    const auto d = schema(R"({"definitions": {"P": {"type": "integer"}},
                              "type": "array", "items": {"$ref": "#/definitions/P"}})");
    expect_complete(d, "[1, 2]");
    EXPECT_EQ(run(d, "[1, \"2\"]"), 4);
}

TEST(JsonGrammar, SchemaAdditionalPropertiesAndNesting) {
    const auto open = schema(R"({"type": "object", "properties": {"id": {"type": "integer"}},
        "required": ["id"], "additionalProperties": true})");
    expect_complete(open, R"({"id": 1, "idx": "free", "i": [true]})");
    EXPECT_EQ(run(open, R"({"id": 1, "id": 2})"), 13);  // a named key twice
    const auto typed = schema(R"({"type": "object", "additionalProperties": {"type": "number"}})");
    expect_complete(typed, R"({"a": 1, "b": 2.5e3})");
    EXPECT_EQ(run(typed, R"({"a": "x"})"), 6);
    const auto nested = schema(R"({"type": "object", "properties": {
        "points": {"type": "array", "minItems": 1, "items": {"type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"], "additionalProperties": false}}},
        "required": ["points"], "additionalProperties": false})");
    expect_complete(nested, R"({"points": [{"x": 1, "y": 2}, {"y": 0.5, "x": -1}]})");
    EXPECT_EQ(run(nested, R"({"points": []})"), 12);  // minItems 1
    EXPECT_EQ(run(nested, R"({"points": [{"x": 1}]})"), 19);
}

TEST(JsonGrammar, EnumConstAndScalars) {
    const auto e = schema(R"({"type": "object", "properties": {
        "color": {"enum": ["red", "green", "re"]}, "n": {"enum": [1, 12, null]},
        "k": {"const": {"a": [1, 2]}}, "b": {"type": "boolean"}},
        "required": ["color"], "additionalProperties": false})");
    expect_complete(e, R"({"color": "red"})");
    expect_complete(e, R"({"color": "re", "n": 12, "k": {"a":[1,2]}, "b": false})");
    expect_complete(e, R"({"color": "green", "n": 1})");
    expect_complete(e, R"({"n": null, "color": "red"})");
    EXPECT_EQ(run(e, R"({"color": "blue"})"), 11);
    EXPECT_EQ(run(e, R"({"color": "redd"})"), 14);
    EXPECT_EQ(run(e, R"({"color": "red", "n": 2})"), 22);
    EXPECT_EQ(run(e, R"({"color": "red", "n": 123})"), 24);
    EXPECT_EQ(run(e, R"({"color": "red", "k": {"a": [1,2]}})"), 27);  // compact form only
    EXPECT_EQ(run(e, R"({"color": "red", "b": null})"), 22);
    // Top-level scalars end only when complete.
    const auto num = schema(R"({"type": "number"})");
    EXPECT_EQ(run(num, "12"), -1);
    EXPECT_EQ(run(num, "12."), 1003);
    EXPECT_EQ(run(num, "-"), 1001);
    const auto lit = schema(R"({"enum": [1, 12]})");
    EXPECT_EQ(run(lit, "1"), -1);
    EXPECT_EQ(run(lit, "12"), -1);
    EXPECT_EQ(run(lit, "13"), 1);
}

TEST(JsonGrammar, AnyOfBranchesOfDifferentTypes) {
    const auto g = schema(R"({"type": "object", "properties": {
        "nick": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Nick"},
        "v": {"oneOf": [{"type": "integer"}, {"enum": ["auto", true]},
                        {"type": "array", "items": {"type": "boolean"}}]}},
        "required": ["nick", "v"], "additionalProperties": false})");
    expect_complete(g, R"({"nick": null, "v": 3})");
    expect_complete(g, R"({"nick": "x", "v": "auto"})");
    expect_complete(g, R"({"v": true, "nick": ""})");
    expect_complete(g, R"({"v": [false, true], "nick": null})");
    EXPECT_EQ(run(g, R"({"nick": 1})"), 9);
    EXPECT_EQ(run(g, R"({"nick": null, "v": 1.5})"), 21);
    EXPECT_EQ(run(g, R"({"nick": null, "v": "man"})"), 21);
    EXPECT_EQ(run(g, R"({"nick": null, "v": false})"), 20);
    EXPECT_EQ(run(g, R"({"nick": null, "v": [1]})"), 21);
}

TEST(JsonGrammar, SnapshotsRollBack) {
    const auto g = json_object_grammar();
    GrammarState st(g);
    ASSERT_TRUE(st.advance("{\"a\": [1, "));
    const GrammarState snap = st;
    ASSERT_TRUE(st.advance("{\"b\": \"x"));
    EXPECT_TRUE(st.in_plain_string());
    EXPECT_FALSE(st.advance("\"}]}}"));  // refused as a whole: state unchanged
    ASSERT_TRUE(st.advance("\"}]}"));
    EXPECT_TRUE(st.can_end());
    st = snap;
    EXPECT_FALSE(st.can_end());
    ASSERT_TRUE(st.advance("2]}"));
    EXPECT_TRUE(st.can_end());
    EXPECT_TRUE(st.finished());
}

TEST(JsonGrammar, UnsupportedSchemasAreRefusedByName) {
    EXPECT_NE(error_of(R"({"type": "string", "contentEncoding": "base64"})")
                  .find("'contentEncoding' at /"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"properties": {"a": {"allOf": []}}})").find("'allOf' at /properties/a"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"anyOf": [{"type": "integer"}, {"type": "number"}]})")
                  .find("share a JSON type (branch 1)"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"oneOf": [{"type": "object"}, {"type": "object"}]})").find("oneOf"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"anyOf": [{"type": "string"}], "type": "string"})")
                  .find("'type' next to 'anyOf'"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"anyOf": []})").find("non-empty"), std::string::npos);
    EXPECT_NE(
        error_of(R"({"properties": {"a": {"type": "integer", "minimum": 0}}})").find("'minimum'"),
        std::string::npos);
    EXPECT_NE(error_of(R"({"$ref": "#/x"})").find("does not point into the schema"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"$ref": "https://x/s.json"})").find("only references inside"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"$defs": {"N": {"type": "object", "properties": {
                            "next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"})")
                  .find("recursive '$ref' \"#/$defs/N\" at /$defs/N/properties/next"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"$ref": "#/$defs/A", "type": "string", "$defs": {"A": {}}})")
                  .find("'type' next to '$ref'"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"type": "date"})").find("unknown type 'date'"), std::string::npos);
    EXPECT_NE(error_of(R"({"items": [{}]})").find("tuple"), std::string::npos);
    EXPECT_NE(error_of(R"({"required": ["x"]})").find("\"x\""), std::string::npos);
    EXPECT_NE(error_of(R"({"enum": []})").find("enum"), std::string::npos);
    EXPECT_NE(error_of(R"({"type": "integer", "enum": [1.5]})").find("1.5"), std::string::npos);
    EXPECT_NE(error_of(R"({"minItems": 3, "maxItems": 2})").find("maxItems"), std::string::npos);
    EXPECT_NE(error_of("false").find("admits no value"), std::string::npos);
    // Annotations constrain nothing and are accepted.
    EXPECT_EQ(error_of(R"({"title": "t", "description": "d", "type": "object"})"), "no error");
}

TEST(JsonGrammar, ResponseFormat) {
    EXPECT_EQ(response_format_grammar(json::parse(R"({"type": "text"})")), nullptr);
    const auto o = response_format_grammar(json::parse(R"({"type": "json_object"})"));
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(run(o, "{}"), -1);
    const auto s = response_format_grammar(json::parse(
        R"({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array"}}})"));
    EXPECT_EQ(run(s, "[1]"), -1);
    for (const char* bad : {R"({"type": "yaml"})", R"({"type": "json_schema"})", R"([])",
                            R"({"type": "json_schema", "json_schema": {}})"})
        EXPECT_THROW(response_format_grammar(json::parse(bad)), Error) << bad;
}
