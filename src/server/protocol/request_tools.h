// The tool-calling fields of POST /v1/chat/completions, and the messages as the chat template
// sees them. Calls are parsed from output in the template's format (chat/tool_calls.h); the
// Service refuses tools for a template that shows none (unless --tool-call-format names one).
//
//   tools               [{"type": "function", "function": {"name", "description", "parameters"}}]
//                       passed to the template with their key order kept (it shows in tojson)
//   tool_choice         "auto" (default; only with tools), "none" (the tools are not given to
//                       the template), "required" or {"type": "function", "function": {"name"}}
//                       (a call is forced: chat/tool_call_grammar.h; the name must be a tool's)
//   parallel_tool_calls false: only the first call of a reply is returned
//   messages            role "tool" (tool_call_id, content) and assistant tool_calls are fed back
//                       through the template as sent (arguments as a JSON string)
//
// Every malformed value is an ApiError 400 naming the field.
#pragma once

#include <nlohmann/json.hpp>

namespace specula {

struct ToolFields {
    nlohmann::ordered_json tools;  // null: no tools (absent, empty or tool_choice "none")
    bool parallel_tool_calls = true;
    bool forced = false;      // tool_choice "required" or a named function
    std::string forced_name;  // the named function ("" for "required")
};

ToolFields get_tool_fields(const nlohmann::ordered_json& body);

// Each message as sent, its role "developer" as "system" and a content given as text parts
// joined into one string (`texts`: each message's text as server/protocol/request.cpp parsed it).
nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages,
                                         const std::vector<std::string>& texts);

}  // namespace specula
