// Tool calls as models write them, parsed into OpenAI's shape (a name and arguments as JSON text).
// The formats are rows of one table (chat/tool_format.h's ToolFormatSpec, listed in
// chat/tool_formats.cpp), each written in its own chat/tool_format_<name>.cpp, whose comment shows
// what the model writes: hermes (Qwen2.5/Qwen3, Hermes), llama3, mistral, qwen3-coder, harmony
// (gpt-oss). A format's row names it, recognises its chat templates, parses a reply, says where
// its calls start (the stream gate) and frames a forced call (chat/tool_call_grammar.h); nothing
// outside its file and the table's line dispatches on it.
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

struct ToolFormatSpec;  // one row of the formats' table (chat/tool_format.h)

// A tool-call format: a handle on its row, compared by identity.
struct ToolCallFormat {
    const ToolFormatSpec* spec = nullptr;
    bool operator==(const ToolCallFormat&) const = default;

    // The format used when neither the template nor --tool-call-format names one.
    static const ToolCallFormat hermes;
};

// Its name: the value --tool-call-format takes ("qwen3-coder").
const char* tool_call_format_name(ToolCallFormat f);
// A format's name, or "auto" (nullopt: chosen from the template); Error naming `what` and
// listing the names otherwise.
std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name, const char* what);
// The formats' names, ", " between them (for messages and help texts).
std::string tool_call_format_names();
// The format vLLM's --tool-call-parser `parser` selects (hermes, qwen, llama3_json, ...); Error
// listing vLLM's names it knows otherwise.
ToolCallFormat tool_call_format_for_vllm_parser(std::string_view parser);
// The format a chat template teaches its model; nullopt when it shows none.
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view template_source);
// Whether replies are parsed even without tools (harmony: its analysis channel is reasoning).
bool parses_without_tools(ToolCallFormat f);

struct ToolCall {
    std::string name;
    std::string arguments;  // JSON text
};

struct ParsedToolCalls {
    std::string content;
    std::vector<ToolCall> calls;
    std::string reasoning;  // harmony's analysis channel
    // The parser read no markup: content is the text, byte for byte (no calls, no reasoning).
    // Harmony messages without a call are markup read: their bodies are content.
    bool as_text = false;
};

// `tools`: the request's tools ([{"type": "function", "function": {...}}] or null), which
// qwen3-coder reads for the parameters' types. Total on any bytes (invalid UTF-8 included: the
// arguments are valid JSON, a bad byte U+FFFD); should a parser still throw, the exception is an
// Error naming the format, which the server answers with a 500 for that request alone.
ParsedToolCalls parse_tool_calls(ToolCallFormat f, std::string_view text,
                                 const nlohmann::ordered_json& tools = nullptr);

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
