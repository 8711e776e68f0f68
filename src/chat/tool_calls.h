// Tool calls in the Hermes / Qwen format, which Qwen2.5/Qwen3 templates teach the model to write:
//
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// parse_hermes_tool_calls() finds such blocks in generated text: the text before the first one
// is content, each block a call (arguments as JSON text, key order kept). It never guesses: when
// any block is not a JSON object with a string "name" (and an object or string "arguments"), the
// whole text stays content and there are no calls. A last block cut off before </tool_call>
// counts when its JSON is complete.
//
// ToolCallGate streams content while holding back from the first "<tool_call>" (or the start of
// one cut between pieces) on, so that a client never sees a call's markup as content; trailing
// whitespace is held too, so the streamed content before a call equals the parsed content.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specula {

struct ToolCall {
    std::string name;
    std::string arguments;  // JSON text
};

struct ParsedToolCalls {
    std::string content;
    std::vector<ToolCall> calls;
};

// Whether a chat template writes the Hermes <tool_call> format.
bool template_uses_hermes_tools(std::string_view source);

ParsedToolCalls parse_hermes_tool_calls(std::string_view text);

class ToolCallGate {
  public:
    // The content that is certain to be content; the rest is held.
    std::string push(std::string_view text);
    bool holding_call() const { return in_call_; }
    const std::string& held() const { return held_; }

  private:
    std::string held_;
    bool in_call_ = false;
};

}  // namespace specula
