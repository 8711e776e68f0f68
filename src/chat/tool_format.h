// The tool-call formats' parsers (one per chat/tool_format_*.cpp) and the pieces they share;
// chat/tool_calls.h is the interface the rest of the project uses.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "chat/tool_calls.h"

namespace specula::tool_format {

inline constexpr const char* kSpace = " \t\r\n";

ParsedToolCalls parse_hermes(std::string_view text);
ParsedToolCalls parse_llama3(std::string_view text);
ParsedToolCalls parse_mistral(std::string_view text);
ParsedToolCalls parse_qwen3_coder(std::string_view text, const nlohmann::ordered_json& tools);
ParsedToolCalls parse_harmony(std::string_view text);

// The text unchanged as content, no calls.
inline ParsedToolCalls as_content(std::string_view text) {
    return {std::string(text), {}, {}};
}
std::string trim_right(std::string_view s);
std::string trim(std::string_view s);
// The end (one past) of the JSON object or array starting at s[at] ('{' or '['), strings and
// escapes respected; npos when it does not close.
size_t json_extent(std::string_view s, size_t at);
// A call from {"name": "...", <args_key>: {...} or "..."} (args_key, then alt_key when given);
// false when it is not one. Missing arguments are "{}".
bool call_from_json(const nlohmann::ordered_json& j, ToolCall& out,
                    const char* args_key = "arguments", const char* alt_key = nullptr);
// Text after the calls: appended to content on a new line.
void append_content(ParsedToolCalls& out, std::string_view rest);

}  // namespace specula::tool_format
