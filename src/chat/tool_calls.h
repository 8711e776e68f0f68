// Tool calls as models write them, parsed into OpenAI's shape (a name and arguments as JSON text).
// One format per file (chat/tool_format_*.cpp), all behind parse_tool_calls():
//
//   hermes       Qwen2.5/Qwen3 and Hermes templates:
//                  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   llama3       Llama 3.x: the whole reply is {"name": "f", "parameters": {...}} (several may
//                follow one another, separated by ';' or whitespace), or such JSON after
//                <|python_tag|> (text before it is content)
//   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...] (older templates) or
//                [TOOL_CALLS]f[ARGS]{...} repeated (newer, optionally [CALL_ID]id before [ARGS])
//   qwen3_coder  <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>
//                \n</tool_call>; each value typed by the tool's JSON schema (a "string"
//                parameter stays text, others are read as JSON when they parse)
//   harmony      gpt-oss: messages <|channel|>analysis<|message|>...<|end|> (reasoning),
//                <|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json
//                <|message|>{...}<|call|> (a call), <|channel|>final<|message|>... (content)
//
// The parsers never guess: when any call is malformed (bad JSON, no name, a cut-off block that
// is not complete), the whole text stays content and there are no calls. Text before the first
// call is content without its trailing whitespace; text after the calls is kept as content.
//
// ToolCallGate streams content while holding back everything from the first marker of the
// format's calls on (or from a possible start of one cut between pieces), so a client never sees
// call markup as content; the streamed content before a call equals the parsed content.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specula {

enum class ToolCallFormat { hermes, llama3, mistral, qwen3_coder, harmony };

// "hermes", "llama3", "mistral", "qwen3-coder", "harmony".
const char* tool_call_format_name(ToolCallFormat f);
// One of the names above, or "auto" (nullopt: chosen from the template); Error naming `what`
// and listing the values otherwise.
std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name, const char* what);
// The format a chat template teaches its model; nullopt when it shows none.
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view template_source);

struct ToolCall {
    std::string name;
    std::string arguments;  // JSON text
};

struct ParsedToolCalls {
    std::string content;
    std::vector<ToolCall> calls;
    std::string reasoning;  // harmony's analysis channel
};

// `tools`: the request's tools ([{"type": "function", "function": {...}}] or null), which
// qwen3_coder reads for the parameters' types.
ParsedToolCalls parse_tool_calls(ToolCallFormat f, std::string_view text,
                                 const nlohmann::ordered_json& tools = nullptr);

// Whether a chat template writes the Hermes <tool_call> format.
bool template_uses_hermes_tools(std::string_view source);
ParsedToolCalls parse_hermes_tool_calls(std::string_view text);

// Where a format's calls start: `anywhere` in the text, or only `at_start` (the first bytes
// that are not whitespace).
struct ToolCallMarkers {
    std::vector<std::string> anywhere, at_start;
};
ToolCallMarkers tool_call_markers(ToolCallFormat f);

class ToolCallGate {
  public:
    ToolCallGate() : ToolCallGate(ToolCallFormat::hermes) {}
    explicit ToolCallGate(ToolCallFormat f) : format_(f), markers_(tool_call_markers(f)) {}

    // The content that is certain to be content; the rest is held.
    std::string push(std::string_view text);
    // At the end of the text: what was held, parsed (`tools` as for parse_tool_calls). Its
    // content is the rest to stream: what push() gave followed by it equals the content of
    // parse_tool_calls() over the whole text, and its calls and reasoning are that parse's.
    ParsedToolCalls finish(const nlohmann::ordered_json& tools = nullptr);
    bool holding_call() const { return in_call_; }
    const std::string& held() const { return held_; }

  private:
    std::string release_before(size_t at);

    ToolCallFormat format_ = ToolCallFormat::hermes;
    ToolCallMarkers markers_;
    std::string held_;
    std::string dropped_;    // the whitespace before a call's marker, not sent
    bool released_ = false;  // push() gave content (not only whitespace)
    bool in_call_ = false;
    bool started_ = false;  // text other than whitespace went out: at_start markers are over
};

}  // namespace specula
