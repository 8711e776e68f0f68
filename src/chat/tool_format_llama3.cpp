// Llama 3.x JSON tool calls (see tool_calls.h): {"name": "f", "parameters": {...}} as the whole
// reply, or after <|python_tag|>; several calls separated by ';' or whitespace.
#include "chat/tool_format.h"

namespace specula::tool_format {

namespace {

constexpr std::string_view kTag = "<|python_tag|>";
// End-of-turn tokens a reply may still carry after its calls.
constexpr std::string_view kEnds[] = {"<|eom_id|>", "<|eot_id|>"};

ParsedToolCalls parse_llama3(std::string_view text, const nlohmann::ordered_json& /*tools*/) {
    ParsedToolCalls out;
    size_t at = text.find(kTag);
    if (at != std::string_view::npos) {
        out.content = trim_right(text.substr(0, at));
        at += kTag.size();
    } else {
        at = text.find_first_not_of(kSpace);
        if (at == std::string_view::npos || text[at] != '{') return as_content(text);
    }
    while (true) {
        at = text.find_first_not_of(" \t\r\n;", at);
        if (at == std::string_view::npos) break;
        if (text[at] != '{') {
            std::string_view rest = text.substr(at);
            for (std::string_view end : kEnds)
                if (rest.starts_with(end)) rest.remove_prefix(end.size());
            if (out.calls.empty()) return as_content(text);
            append_content(out, rest);
            break;
        }
        const size_t end = json_extent(text, at);
        if (end == std::string_view::npos) return as_content(text);
        const auto j = nlohmann::ordered_json::parse(text.substr(at, end - at), nullptr, false);
        ToolCall call;
        if (j.is_discarded() || !call_from_json(j, call, "parameters", "arguments"))
            return as_content(text);
        out.calls.push_back(std::move(call));
        at = end;
    }
    if (out.calls.empty()) return as_content(text);
    return out;
}

bool detect(std::string_view src) {
    return has(src, "<|python_tag|>") || has(src, "<|start_header_id|>");
}

constexpr std::string_view kVllmParsers[] = {"llama3_json", "llama4_json"};
constexpr std::string_view kAnywhere[] = {"<|python_tag|>"};

constexpr std::string_view kAtStart[] = {"{"};

ForcedCall forced_call(const std::string& name, const nlohmann::json& params) {
    return {call_object_schema("parameters", {{"const", name}}, params), "", "",
            "/properties/parameters"};
}

CallFrame forced_any(const std::string& name) {
    return {"{\"name\": " + nlohmann::json(name).dump() + ", \"parameters\": ", "}"};
}

}  // namespace

extern const ToolFormatSpec kLlama3ToolFormat = {
    .name = "llama3",
    .detect = detect,
    .parse = parse_llama3,
    .vllm_parsers = kVllmParsers,
    .markers_anywhere = kAnywhere,
    .markers_at_start = kAtStart,
    .forced_call = forced_call,
    .forced_any = forced_any,
};

}  // namespace specula::tool_format
