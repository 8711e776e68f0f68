// The tool-call formats' table row (one per chat/tool_format_<name>.cpp, listed once in
// chat/tool_formats.cpp) and the pieces their parsers share; chat/tool_calls.h is the interface
// the rest of the project uses.
//
// A new format: write chat/tool_format_<name>.cpp defining `extern const ToolFormatSpec
// kFooToolFormat = {...}` (inside namespace specula::tool_format) and add it to the table's line in
// tool_formats.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "chat/tool_calls.h"

namespace specula::tool_format {

inline constexpr const char* kSpace = " \t\r\n";

// A forced call to one function (tool_call_grammar.h): the schema the generated JSON follows,
// between fixed text; `params_at` is the JSON pointer of the function's `parameters` inside it
// ("" when the schema is the parameters), which their `$ref`s ("#/$defs/...") resolve against.
struct ForcedCall {
    nlohmann::json schema;
    std::string prefix, suffix;
    std::string params_at;
};
// One alternative of "required" over several functions: the text before the function's
// `parameters` schema and after it.
struct CallFrame {
    std::string prefix, suffix;
};

}  // namespace specula::tool_format

namespace specula {

// One tool-call format: its row of the table, written in its chat/tool_format_<name>.cpp.
struct ToolFormatSpec {
    const char* name;  // --tool-call-format's value
    // Whether a chat template's source writes this format. The table is tried in its order, the
    // most specific format first (Qwen3-Coder's templates also write <tool_call>).
    bool (*detect)(std::string_view template_source);
    // A reply's calls, content and reasoning (`tools` as for parse_tool_calls).
    ParsedToolCalls (*parse)(std::string_view text, const nlohmann::ordered_json& tools);
    // vLLM's --tool-call-parser names that select it.
    std::span<const std::string_view> vllm_parsers = {};
    // Where its calls start (ToolCallGate): markers anywhere, or only at the start.
    std::span<const std::string_view> markers_anywhere = {}, markers_at_start = {};
    // The grammar of a forced call: to the function `name` with `params` its parameters' schema;
    // and one alternative (function `name`) when any of several may be called. Null: forcing a
    // call is refused with an Error that gives `no_forced_call` as the reason.
    tool_format::ForcedCall (*forced_call)(const std::string& name,
                                           const nlohmann::json& params) = nullptr;
    tool_format::CallFrame (*forced_any)(const std::string& name) = nullptr;
    const char* no_forced_call = "";
    bool parses_without_tools = false;  // see tool_calls.h's parses_without_tools()
};

}  // namespace specula

namespace specula::tool_format {

// The table, in detection order.
std::span<const ToolFormatSpec* const> tool_formats();

// Whether `source` contains `s`.
inline bool has(std::string_view source, std::string_view s) {
    return source.find(s) != std::string_view::npos;
}
// {"name": <name_schema>, <args_key>: <args>} and nothing else.
nlohmann::json call_object_schema(const char* args_key, nlohmann::json name_schema,
                                  nlohmann::json args);

// The text unchanged as content, no calls.
inline ParsedToolCalls as_content(std::string_view text) {
    return {std::string(text), {}, {}, true};
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
