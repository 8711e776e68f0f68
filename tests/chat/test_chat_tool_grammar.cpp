// Forced tool calls (chat/tool_call_grammar.h): the grammar for tool_choice "required" or a named
// function admits one call in the format's markup with arguments matching the tool's schema, and
// refuses another name, a property the schema does not have, or a wrong type; what it admits the
// format's parser (chat/tool_calls.h) reads back as that call. The grammar's shortest completion
// (byte by byte, each byte lowering min_remaining) is always such a call.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/tool_call_grammar.h"
#include "common/error.h"
#include "sampling/grammar_state.h"
#include "sampling/json_grammar.h"

namespace {

using namespace specula;
using ojson = nlohmann::ordered_json;

// A format by its name (chat/tool_format_<name>.cpp's row).
ToolCallFormat fmt(const char* name) {
    return *specula::parse_tool_call_format(name, "test");
}

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "now", "parameters": {"type": "object",
    "properties": {}}}}])");

bool admits(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
    GrammarState s(g);
    return s.advance(text) && s.can_end();
}

// The shortest completion from the start: at each step the smallest byte that lowers
// min_remaining.
std::string shortest(const std::shared_ptr<const JsonGrammar>& g) {
    GrammarState s(g);
    std::string out;
    while (!s.can_end()) {
        const size_t left = s.min_remaining();
        bool moved = false;
        for (int c = 1; c < 256 && !moved; ++c) {
            GrammarState t(s);
            if (t.step(uint8_t(c)) && t.min_remaining() < left) {
                s = t;
                out += char(c);
                moved = true;
            }
        }
        if (!moved || out.size() > 500) {
            ADD_FAILURE() << "no completion after '" << out << "'";
            break;
        }
    }
    return out;
}

void expect_call(ToolCallFormat f, const std::string& text, const std::string& name,
                 const std::string& args) {
    const ParsedToolCalls p = parse_tool_calls(f, text, kTools);
    ASSERT_EQ(p.calls.size(), 1u) << text;
    EXPECT_EQ(p.calls[0].name, name) << text;
    EXPECT_EQ(p.calls[0].arguments, args) << text;
    EXPECT_EQ(p.content, "") << text;
}

TEST(ChatToolGrammar, HermesNamedFunction) {
    const auto g = tool_call_grammar(fmt("hermes"), kTools, "get_weather");
    const std::string good =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
        "\"c\"}}\n</tool_call>";
    EXPECT_TRUE(admits(g, good));
    expect_call(fmt("hermes"), good, "get_weather", R"({"city":"Paris","unit":"c"})");
    for (const std::string bad :
         {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",  // no markup
          "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",  // not named
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": "
          "\"P\"}}\n</tool_call>",
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 3}}\n</tool_call>",
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}",  // cut
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": "
          "\"k\"}}\n</tool_call>"})
        EXPECT_FALSE(admits(g, bad)) << bad;
    const std::string s = shortest(g);
    EXPECT_TRUE(s.starts_with("<tool_call>\n{")) << s;
    const ParsedToolCalls p = parse_tool_calls(fmt("hermes"), s, kTools);
    ASSERT_EQ(p.calls.size(), 1u) << s;
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_NE(p.calls[0].arguments.find("\"city\""), std::string::npos);
}

TEST(ChatToolGrammar, RequiredOverSeveralTools) {
    const auto g = tool_call_grammar(fmt("hermes"), kTools, "");
    EXPECT_TRUE(admits(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_TRUE(admits(g,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"P\"}}\n</tool_call>"));
    EXPECT_FALSE(admits(g, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(
        admits(g, "Sure.<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_EQ(parse_tool_calls(fmt("hermes"), shortest(g), kTools).calls.size(), 1u);
    // The name comes first, and the arguments are held to that tool's own schema.
    EXPECT_FALSE(admits(g,
                        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": "
                        "\"P\"}}\n</tool_call>"));
    EXPECT_FALSE(admits(
        g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 5}}\n</tool_call>"));
    EXPECT_FALSE(
        admits(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(admits(g,
                        "<tool_call>\n{\"arguments\": {\"city\": \"P\"}, \"name\": "
                        "\"get_weather\"}\n</tool_call>"));
    // `now` names no properties: its arguments are closed (llama.cpp, vLLM), {} only.
    EXPECT_FALSE(
        admits(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"x\": [1]}}\n</tool_call>"));
    EXPECT_TRUE(admits(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    // While the name is open, the shortest completion is the shorter tool's call.
    GrammarState s(g);
    ASSERT_TRUE(s.advance("<tool_call>\n{\"name\": \""));
    EXPECT_EQ(s.min_remaining(), std::string("now\", \"arguments\": {}}\n</tool_call>").size());
    ASSERT_TRUE(s.advance("get"));
    EXPECT_FALSE(s.can_end());
    EXPECT_EQ(s.min_remaining(),
              std::string("_weather\", \"arguments\": {\"city\":\"\"}}\n</tool_call>").size());
    // llama3's form.
    const auto l = tool_call_grammar(fmt("llama3"), kTools, "");
    EXPECT_TRUE(admits(l, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"));
    EXPECT_FALSE(admits(l, "{\"name\": \"get_weather\", \"parameters\": {\"unit\": \"c\"}}"));
    EXPECT_EQ(parse_tool_calls(fmt("llama3"), shortest(l), kTools).calls.size(), 1u);
    // harmony: the header names the function.
    const auto h = tool_call_grammar(fmt("harmony"), kTools, "");
    const std::string hcall =
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        "{\"city\": \"Oslo\"}";
    EXPECT_TRUE(admits(h, hcall));
    expect_call(fmt("harmony"), hcall, "get_weather", R"({"city":"Oslo"})");
    EXPECT_FALSE(admits(h,
                        "<|channel|>commentary to=functions.get_weather "
                        "<|constrain|>json<|message|>{\"when\": 1}"));
    EXPECT_EQ(parse_tool_calls(fmt("harmony"), shortest(h), kTools).calls.size(), 1u);
    // Mistral's array form.
    const auto m = tool_call_grammar(fmt("mistral"), kTools, "");
    const std::string call = "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}]";
    EXPECT_TRUE(admits(m, call));
    expect_call(fmt("mistral"), call, "now", "{}");
    EXPECT_EQ(parse_tool_calls(fmt("mistral"), shortest(m), kTools).calls.size(), 1u);
}

TEST(ChatToolGrammar, EveryJsonFormatNamed) {
    struct Case {
        ToolCallFormat f;
        std::string good;
    };
    for (const Case& c : {
             Case{fmt("llama3"),
                  "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"},
             Case{fmt("mistral"), "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}"},
             Case{fmt("harmony"),
                  "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                  "{\"city\": \"Oslo\"}"},
         }) {
        const auto g = tool_call_grammar(c.f, kTools, "get_weather");
        EXPECT_TRUE(admits(g, c.good)) << c.good;
        EXPECT_FALSE(admits(g, "Hi " + c.good));
        expect_call(c.f, c.good, "get_weather", R"({"city":"Oslo"})");
        const std::string s = shortest(g);
        const ParsedToolCalls p = parse_tool_calls(c.f, s, kTools);
        ASSERT_EQ(p.calls.size(), 1u) << s;
        EXPECT_EQ(p.calls[0].name, "get_weather") << s;
    }
}

TEST(ChatToolGrammar, RefusedWithAClearError) {
    const auto message = [](ToolCallFormat f, const std::string& name, const ojson& tools) {
        try {
            tool_call_grammar(f, tools, name);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message(fmt("hermes"), "nope", kTools).find("'nope'"), std::string::npos);
    EXPECT_NE(message(fmt("qwen3-coder"), "now", kTools).find("qwen3-coder"), std::string::npos);
    ojson twice = kTools;
    twice.push_back(kTools[1]);
    EXPECT_NE(message(fmt("hermes"), "", twice).find("two functions are named 'now'"),
              std::string::npos);
    const ojson pattern = ojson::parse(R"js([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"id": {"type": "string",
        "pattern": "^(?=a)"}}}}}])js");
    EXPECT_NE(message(fmt("hermes"), "f", pattern).find("'pattern'"), std::string::npos);
    EXPECT_NE(message(fmt("hermes"), "f", pattern).find("lookaround"), std::string::npos);
}

// Alternatives framed by prefixes that are prefixes of each other cannot be told apart.
TEST(ChatToolGrammar, AlternativesMustBeToldApartByTheirPrefix) {
    const nlohmann::json any = {{"type", "object"}}, num = {{"type", "number"}};
    try {
        json_schema_alternatives({{"<a>", &any, ""}, {"<a>x", &num, ""}});
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot be told apart"), std::string::npos);
    }
    const auto g = json_schema_alternatives({{"<b>", &num, "</b>"}, {"<a>", &any, "</a>"}});
    EXPECT_TRUE(admits(g, "<a>{}</a>"));
    EXPECT_TRUE(admits(g, "<b>1.5</b>"));
    EXPECT_FALSE(admits(g, "<a>1</a>"));
    EXPECT_FALSE(admits(g, "<b>1</a>"));
    EXPECT_FALSE(admits(g, "<c>1</c>"));
}

// Pydantic's schemas: nested models in $defs, referred to by "#/$defs/Name" from the parameters.
// Forcing one such tool (named, or the only one) resolves the references in the parameters, not
// in the call object that wraps them; "required" over several tools too; a hostile tool schema
// (the $ref ladder of issue 45) compiles small.
TEST(ChatToolGrammar, ParametersWithDefsAndRefs) {
    const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "book",
      "parameters": {"$defs": {"Guest": {"type": "object", "properties": {
          "name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"],
          "title": "Guest"}},
        "type": "object", "properties": {"guest": {"$ref": "#/$defs/Guest"},
          "plus_one": {"anyOf": [{"$ref": "#/$defs/Guest"}, {"type": "null"}]}},
        "required": ["guest"], "title": "Book"}}},
      {"type": "function", "function": {"name": "now", "parameters": {"type": "object",
        "properties": {}}}}])");
    struct Case {
        const char* format;
        std::string good;
    };
    for (const Case& c : {
             Case{"hermes",
                  "<tool_call>\n{\"name\": \"book\", \"arguments\": {\"guest\": "
                  "{\"name\": \"Ada\"}, \"plus_one\": null}}\n</tool_call>"},
             Case{"llama3",
                  "{\"name\": \"book\", \"parameters\": {\"guest\": {\"name\": "
                  "\"Ada\"}, \"plus_one\": null}}"},
             Case{"mistral",
                  "[TOOL_CALLS]book[ARGS]{\"guest\": {\"name\": \"Ada\"}, \"plus_one\": null}"},
             Case{"harmony",
                  "<|channel|>commentary to=functions.book <|constrain|>json<|message|>"
                  "{\"guest\": {\"name\": \"Ada\"}, \"plus_one\": null}"},
         }) {
        const auto g = tool_call_grammar(fmt(c.format), tools, "book");
        EXPECT_TRUE(admits(g, c.good)) << c.format;
        std::string bad = c.good;
        bad.replace(bad.find("\"Ada\""), 5, "42");  // Guest.name is a string
        EXPECT_FALSE(admits(g, bad)) << c.format;
        const ParsedToolCalls p = parse_tool_calls(fmt(c.format), c.good, tools);
        ASSERT_EQ(p.calls.size(), 1u) << c.format;
        EXPECT_EQ(p.calls[0].arguments, R"({"guest":{"name":"Ada"},"plus_one":null})");
    }
    // "required" over both: the arguments of "book" still resolve their $defs.
    const auto any = tool_call_grammar(fmt("hermes"), tools, "");
    EXPECT_TRUE(admits(any,
                       "<tool_call>\n{\"name\": \"book\", \"arguments\": {\"guest\": "
                       "{\"name\": \"Ada\", \"age\": 36}}}\n</tool_call>"));
    // 8 properties x 8 levels, each property a $ref to the next: 16M nodes unfolded.
    ojson ladder = ojson::parse(R"({"$ref": "#/$defs/L0"})");
    for (int l = 0; l < 8; ++l) {
        ojson level = {{"type", "object"}, {"properties", ojson::object()}};
        for (int i = 0; i < 8; ++i)
            level["properties"]["p" + std::to_string(i)] =
                l < 7 ? ojson{{"$ref", "#/$defs/L" + std::to_string(l + 1)}}
                      : ojson{{"type", "string"}};
        ladder["$defs"]["L" + std::to_string(l)] = level;
    }
    const ojson hostile = {
        {{"type", "function"}, {"function", {{"name", "h"}, {"parameters", ladder}}}}};
    const auto h = tool_call_grammar(fmt("hermes"), hostile, "h");
    EXPECT_LE(h->nodes.size(), 40u);
}

}  // namespace
