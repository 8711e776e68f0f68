// gpt-oss harmony messages (see tool_calls.h). After the generation prompt's
// "<|start|>assistant" the model writes messages, each
//   [<|start|>assistant] [to=R] <|channel|>C [to=R] [<|constrain|>json] <|message|>BODY END
// with END one of <|end|>, <|call|>, <|return|> (or the next <|start|>, or the end of the
// text). Channel "analysis" is reasoning; a recipient "functions.NAME" makes BODY a call's JSON
// arguments; any other message ("final", or "commentary" to nobody: a preamble) is content.
#include "chat/tool_format.h"

namespace specula::tool_format {

namespace {

constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>";
constexpr std::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>"};

void append(std::string& to, std::string_view s) {
    const std::string t = trim(s);
    if (t.empty()) return;
    if (!to.empty()) to += "\n";
    to += t;
}

// The recipient written as "to=R" in a header ("" when none).
std::string recipient(std::string_view header) {
    const size_t to = header.find("to=");
    if (to == std::string_view::npos) return "";
    const size_t from = to + 3;
    size_t end = header.find_first_of(" \t\r\n<", from);
    if (end == std::string_view::npos) end = header.size();
    return std::string(header.substr(from, end - from));
}

// The channel's name in a header ("" when none).
std::string channel(std::string_view header) {
    const size_t c = header.find(kChannel);
    if (c == std::string_view::npos) return "";
    const size_t from = c + kChannel.size();
    size_t end = header.find_first_of(" \t\r\n<", from);
    if (end == std::string_view::npos) end = header.size();
    return std::string(header.substr(from, end - from));
}

ParsedToolCalls parse_harmony(std::string_view text, const nlohmann::ordered_json& /*tools*/) {
    const size_t first = std::min(text.find(kStart), text.find(kChannel));
    if (first == std::string_view::npos) return as_content(text);
    ParsedToolCalls out;
    out.content = trim_right(text.substr(0, first));
    size_t at = first;
    while (at < text.size()) {
        const size_t msg = text.find(kMessage, at);
        if (msg == std::string_view::npos) return as_content(text);  // a header cut off
        const std::string_view header = text.substr(at, msg - at);
        const size_t body = msg + kMessage.size();
        size_t end = text.find(kStart, body), next = end;
        for (std::string_view e : kEnds)
            if (const size_t k = text.find(e, body); k < end) end = k, next = k + e.size();
        if (end == std::string_view::npos) end = next = text.size();
        const std::string_view content = text.substr(body, end - body);
        const std::string to = recipient(header), ch = channel(header);
        if (to.starts_with("functions.")) {
            const auto j = nlohmann::ordered_json::parse(content, nullptr, false);
            if (j.is_discarded() || !j.is_object() || to.size() == 10) return as_content(text);
            out.calls.push_back({to.substr(10), j.dump()});
        } else if (!to.empty()) {
            return as_content(text);  // a built-in tool (browser, python): not a function call
        } else if (ch == "analysis") {
            append(out.reasoning, content);
        } else {
            append(out.content, content);
        }
        at = text.find_first_not_of(kSpace, next);
        if (at == std::string_view::npos) break;
        if (!text.substr(at).starts_with(kStart) && !text.substr(at).starts_with(kChannel)) {
            append(out.content, text.substr(at));  // text after the messages
            break;
        }
    }
    return out;
}

bool detect(std::string_view src) {
    return has(src, "<|channel|>") || has(src, "<|start|>assistant");
}

constexpr std::string_view kVllmParsers[] = {"openai"};
constexpr std::string_view kAnywhere[] = {"<|channel|>", "<|start|>"};

// The commentary header names the function; the end token closes the arguments.
std::string call_header(const std::string& name) {
    return "<|channel|>commentary to=functions." + name + " <|constrain|>json<|message|>";
}

ForcedCall forced_call(const std::string& name, const nlohmann::json& params) {
    return {params, call_header(name), "", ""};
}

CallFrame forced_any(const std::string& name) {
    return {call_header(name), ""};
}

}  // namespace

extern const ToolFormatSpec kHarmonyToolFormat = {
    .name = "harmony",
    .detect = detect,
    .parse = parse_harmony,
    .vllm_parsers = kVllmParsers,
    .markers_anywhere = kAnywhere,
    .forced_call = forced_call,
    .forced_any = forced_any,
    .parses_without_tools = true,  // the analysis channel is reasoning
};

}  // namespace specula::tool_format
