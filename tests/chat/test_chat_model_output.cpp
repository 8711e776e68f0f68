// Model output never breaks the reply path (chat/tool_calls.h, chat/reasoning.h): every tool-call
// format's parser and the reasoning split are total on any bytes (invalid UTF-8, cut-off markup,
// markers of other formats), and a streamed reply equals the whole one: the same text fed at once,
// split at every byte, and in random pieces gives the same content, reasoning and calls, with and
// without the reasoning split. fuzz/fuzz_model_output.cpp runs the same check on mutated bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "model_output_check.h"

using namespace specula;
using namespace specula::test;

namespace {

const char* const kFormats[] = {"hermes", "llama3", "mistral", "qwen3-coder", "harmony"};

// Replies as models write them, well-formed or not; the invalid UTF-8 is deliberate.
const std::vector<std::string>& corpus() {
    static const std::vector<std::string> c = {
        "Hello there.",
        "  \n",
        "<think>\nhmm</think>\n\nAnswer",
        "<think>cut off",
        "</think> after an open prompt",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Oslo\"}}\n</tool_call>",
        "Sure.\n<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>\nthen text",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": \"\xff\xfe\"}}</tool_call>",
        "<tool_call>{\"name\": \"\xc3\", \"arguments\": {}}",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n\xff\xc0\x80\xed\xa0\x80\n"
        "</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=\xfe\xff>\n<parameter=\x80\x81>\n\xc3\n</parameter>\n</function>",
        "<tool_call><function=f><parameter=x>\n{\"a\": \"\xe2\x82\"}\n</parameter></function>",
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
        "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": 2}}; {\"name\": \"g\"}<|eom_id|>",
        "  {\"name\": \"f\"",
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\": 1}}]</s>",
        "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]f[CALL_ID]a1[ARGS]{}",
        "[TOOL_CALLS]\xff\xfe[ARGS]{\"x\": 1}",
        "<|channel|>analysis<|message|>think\xff<|end|><|start|>assistant<|channel|>final"
        "<|message|>Hi<|return|>",
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        "{\"city\": \"Oslo\"}<|call|>",
        "<|start|>assistant<|channel|>commentary to=functions.\xc3\xa9\xff <|message|>{}<|call|>",
        "<|channel|>final<|message|>text <|start|>assistant<|channel|>analysis<|message|>more",
        "<|channel|>analysis<|message|>a<|end|>  trailing <|channel|",
        "<|start|>",
        "<|channel|>commentary to=browser.search<|message|>{}<|call|>",
        "<think>\xff</think><tool_call>{\"name\": \"f\"}</tool_call>",
        "\xff\xfe\xfd<tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": \"not json \xff\"}</tool_call>",
    };
    return c;
}

// The text with bytes outside printable ASCII as \xNN, for messages.
std::string shown(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c >= 0x20 && c < 0x7f) {
            out += char(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    return out;
}

void check_text(ToolCallFormat f, const std::string& text, ReplyMode m, std::mt19937& rng) {
    const ReplyParts whole = whole_reply(f, text, m, reply_tools());
    const auto where = [&] {
        return std::string(tool_call_format_name(f)) +
               " split=" + std::to_string(m.split_reasoning) +
               " open=" + std::to_string(m.starts_open) + " text='" + shown(text) + "'";
    };
    EXPECT_TRUE(streamed_reply(f, {text}, m, reply_tools()) == whole) << where();
    for (size_t i = 1; i < text.size(); ++i)
        ASSERT_TRUE(streamed_reply(f, cut(text, {i}), m, reply_tools()) == whole)
            << where() << " cut at " << i;
    std::vector<size_t> every;
    for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
    EXPECT_TRUE(streamed_reply(f, cut(text, every), m, reply_tools()) == whole) << where();
    for (int r = 0; r < 8; ++r) {
        std::vector<size_t> at;
        for (size_t i = 1; i < text.size(); ++i)
            if (rng() % 5 == 0) at.push_back(i);
        ASSERT_TRUE(streamed_reply(f, cut(text, at), m, reply_tools()) == whole) << where();
    }
}

constexpr ReplyMode kModes[] = {{false, false}, {true, false}, {true, true}};

}  // namespace

TEST(ModelOutput, CorpusStreamedEqualsWhole) {
    std::mt19937 rng(45);
    for (const char* name : kFormats) {
        const ToolCallFormat f = *parse_tool_call_format(name, "test");
        for (const std::string& text : corpus())
            for (ReplyMode m : kModes) check_text(f, text, m, rng);
    }
}

// Random replies built from every format's markup, JSON pieces and bad bytes.
TEST(ModelOutput, RandomMarkupStreamedEqualsWhole) {
    static const char* const kPieces[] = {"<tool_call>",
                                          "</tool_call>",
                                          "<function=f>",
                                          "</function>",
                                          "<parameter=x>",
                                          "</parameter>",
                                          "<think>",
                                          "</think>",
                                          "<|channel|>",
                                          "analysis",
                                          "final",
                                          "commentary to=functions.f ",
                                          "<|message|>",
                                          "<|end|>",
                                          "<|call|>",
                                          "<|start|>",
                                          "assistant",
                                          "[TOOL_CALLS]",
                                          "[ARGS]",
                                          "<|python_tag|>",
                                          "{\"name\": \"f\"",
                                          ", \"arguments\": ",
                                          "{\"x\": 1}",
                                          "}",
                                          "{",
                                          "[",
                                          "]",
                                          "\"",
                                          "\\",
                                          ";",
                                          " ",
                                          "\n",
                                          "text",
                                          "\xff",
                                          "\xc3",
                                          "\xe2\x82",
                                          "\x80",
                                          "\xf0\x9f\x98"};
    std::mt19937 rng(4545);
    for (const char* name : kFormats) {
        const ToolCallFormat f = *parse_tool_call_format(name, "test");
        for (int n = 0; n < 200; ++n) {
            std::string text;
            const int len = 1 + int(rng() % 10);
            for (int k = 0; k < len; ++k) text += kPieces[rng() % std::size(kPieces)];
            check_text(f, text, kModes[rng() % 3], rng);
        }
    }
}

// The bytes that threw std::terminate in serve: qwen3-coder's arguments from invalid UTF-8.
TEST(ModelOutput, InvalidUtf8InCallsGivesValidJson) {
    const ToolCallFormat f = *parse_tool_call_format("qwen3-coder", "test");
    const ParsedToolCalls p = parse_tool_calls(
        f,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n\xff\xfeO\n</parameter>\n"
        "<parameter=\xc3>\n1\n</parameter>\n</function>\n</tool_call>",
        reply_tools());
    ASSERT_EQ(p.calls.size(), 1u);
    const auto args = nlohmann::json::parse(p.calls[0].arguments);
    EXPECT_EQ(args["city"], "\xef\xbf\xbd\xef\xbf\xbdO");  // each bad byte a U+FFFD
    EXPECT_EQ(args["\xef\xbf\xbd"], 1);
}
