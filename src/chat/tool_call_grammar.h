// The grammar that forces a tool call (tool_choice "required" or a named function): one call in
// the format's markup, its arguments constrained by the tool's JSON schema (sampling/
// json_grammar.h's subset; another keyword is an Error naming it), so that the parser
// (chat/tool_calls.h) reads it back as a call. Each format frames its call in its own file
// (chat/tool_format_<name>.cpp's forced_call and forced_any; e.g. hermes writes
// <tool_call>\n{"name": N, "arguments": A}\n</tool_call>); a format without them (qwen3-coder,
// whose calls are XML) is refused with an Error.
//
// A is the `parameters` schema of the function N. With one function (named, or the only tool)
// N is its name; "required" over several tools lets N be any of their names, written first
// (`{"name": N, "arguments": `; harmony's header) as one alternative per tool
// (sampling/json_grammar.h), so that the arguments are held to N's own schema. At most one
// whitespace byte in a row between the JSON's tokens. Two tools of the same name are an Error.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/tool_calls.h"
#include "sampling/json_grammar.h"

namespace specula {

// `tools`: the request's [{"type": "function", "function": {...}}]; `name`: the function to
// call ("" for any of them). Error when `name` is not among the tools.
std::shared_ptr<const JsonGrammar> tool_call_grammar(ToolCallFormat f,
                                                     const nlohmann::ordered_json& tools,
                                                     const std::string& name);

}  // namespace specula
