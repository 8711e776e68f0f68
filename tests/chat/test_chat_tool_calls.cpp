// Hermes / Qwen tool calls (chat/tool_calls.h): <tool_call>{json}</tool_call> blocks parsed from
// generated text (content before them kept, arguments as JSON text in the order written), text
// that is not exactly such blocks left as content, and the stream gate that holds a call's markup
// back even when "<tool_call>" is cut between pieces.
#include <gtest/gtest.h>

#include "chat/tool_calls.h"

namespace {

using specula::ParsedToolCalls;

// Hermes replies (chat/tool_format_hermes.cpp).
ParsedToolCalls parse_hermes_tool_calls(std::string_view text) {
    return specula::parse_tool_calls(*specula::parse_tool_call_format("hermes", "test"), text);
}

TEST(ChatToolCalls, ParsesQwenStyleBlocks) {
    const ParsedToolCalls p = parse_hermes_tool_calls(
        "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", "
        "\"arguments\": {}}\n</tool_call>");
    EXPECT_EQ(p.content, "Let me check.");
    ASSERT_EQ(p.calls.size(), 2u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","unit":"c"})");  // order as written
    EXPECT_EQ(p.calls[1].name, "now");
    EXPECT_EQ(p.calls[1].arguments, "{}");
}

TEST(ChatToolCalls, ArgumentsAsStringOrMissing) {
    ParsedToolCalls p = parse_hermes_tool_calls(
        R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)");
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].arguments, R"({"a": 1})");
    EXPECT_EQ(p.content, "");
    p = parse_hermes_tool_calls(R"(<tool_call>{"name": "g"}</tool_call>)");
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].arguments, "{}");
}

TEST(ChatToolCalls, UnclosedLastBlockCountsWhenItsJsonIsComplete) {
    ParsedToolCalls p =
        parse_hermes_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 2}}\n");
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].arguments, R"({"x":2})");
    p = parse_hermes_tool_calls("<tool_call>\n{\"name\": \"f\", \"argum");  // cut off
    EXPECT_TRUE(p.calls.empty());
    EXPECT_EQ(p.content, "<tool_call>\n{\"name\": \"f\", \"argum");
}

TEST(ChatToolCalls, AnythingElseStaysContent) {
    for (const std::string text :
         {"no calls here", "<tool_call>not json</tool_call>", "<tool_call>[1, 2]</tool_call>",
          R"(<tool_call>{"arguments": {}}</tool_call>)", R"(<tool_call>{"name": 3}</tool_call>)",
          R"(<tool_call>{"name": "f", "arguments": 5}</tool_call>)",
          R"(<tool_call>{"name": "f"}</tool_call><tool_call>oops</tool_call>)"}) {
        const ParsedToolCalls p = parse_hermes_tool_calls(text);
        EXPECT_TRUE(p.calls.empty()) << text;
        EXPECT_EQ(p.content, text);
    }
    // Text after the calls is kept as content.
    const ParsedToolCalls p =
        parse_hermes_tool_calls("A<tool_call>{\"name\": \"f\"}</tool_call>\nDone.");
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.content, "A\nDone.");
}

TEST(ChatToolCalls, GateHoldsTheCallEvenWhenTheTagIsCut) {
    const std::string text = "Sure. <tool_call>{\"name\": \"f\"}</tool_call>";
    for (size_t cut = 0; cut <= text.size(); ++cut) {
        specula::ToolCallGate g;
        std::string released = g.push(text.substr(0, cut));
        released += g.push(text.substr(cut));
        EXPECT_EQ(released, "Sure.") << "cut at " << cut;
        EXPECT_TRUE(g.holding_call());
        EXPECT_EQ(g.held(), "<tool_call>{\"name\": \"f\"}</tool_call>");
    }
    specula::ToolCallGate g;
    EXPECT_EQ(g.push("a <tool"), "a");        // a possible tag start is held...
    EXPECT_EQ(g.push("box>"), " <toolbox>");  // ...and released once it is not one
    EXPECT_FALSE(g.holding_call());
    EXPECT_TRUE(specula::detect_tool_call_format("{{- '<tool_call>\\n' }}") ==
                specula::parse_tool_call_format("hermes", "test"));
    EXPECT_FALSE(specula::detect_tool_call_format("[TOOL_CALLS]") ==
                 specula::parse_tool_call_format("hermes", "test"));
}

}  // namespace
