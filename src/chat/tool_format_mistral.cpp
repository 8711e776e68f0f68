// Mistral [TOOL_CALLS] tool calls (see tool_calls.h): a JSON array of calls after the marker
// (older templates), or name[ARGS]{...} after each marker (newer ones, [CALL_ID]id optional).
#include "chat/tool_format.h"

namespace specula::tool_format {

namespace {

constexpr std::string_view kMarker = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]",
                           kEos = "</s>";

// [{"name": ..., "arguments": ...}, ...] at text[at]; the end, or npos when it is not one.
size_t parse_array(std::string_view text, size_t at, ParsedToolCalls& out) {
    const size_t end = json_extent(text, at);
    if (end == std::string_view::npos) return end;
    const auto j = nlohmann::ordered_json::parse(text.substr(at, end - at), nullptr, false);
    if (j.is_discarded() || !j.is_array() || j.empty()) return std::string_view::npos;
    for (const auto& c : j) {
        ToolCall call;
        if (!call_from_json(c, call)) return std::string_view::npos;
        out.calls.push_back(std::move(call));
    }
    return end;
}

// name[CALL_ID]id[ARGS]{...} at text[at]; the end, or npos when it is not one.
size_t parse_named(std::string_view text, size_t at, ParsedToolCalls& out) {
    const size_t args = text.find(kArgs, at);
    if (args == std::string_view::npos) return args;
    std::string_view name = text.substr(at, args - at);
    if (const size_t id = name.find(kCallId); id != std::string_view::npos)
        name = name.substr(0, id);
    if (name.empty() || name.find_first_of(" \t\r\n[]{}\"") != std::string_view::npos)
        return std::string_view::npos;
    const size_t body = text.find_first_not_of(kSpace, args + kArgs.size());
    if (body == std::string_view::npos || text[body] != '{') return std::string_view::npos;
    const size_t end = json_extent(text, body);
    if (end == std::string_view::npos) return end;
    const auto j = nlohmann::ordered_json::parse(text.substr(body, end - body), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::string_view::npos;
    out.calls.push_back({std::string(name), j.dump()});
    return end;
}

ParsedToolCalls parse_mistral(std::string_view text, const nlohmann::ordered_json& /*tools*/) {
    size_t at = text.find(kMarker);
    if (at == std::string_view::npos) return as_content(text);
    ParsedToolCalls out;
    out.content = trim_right(text.substr(0, at));
    while (true) {
        at = text.find_first_not_of(kSpace, at + kMarker.size());
        if (at == std::string_view::npos) return as_content(text);
        const size_t end =
            text[at] == '[' ? parse_array(text, at, out) : parse_named(text, at, out);
        if (end == std::string_view::npos) return as_content(text);
        const size_t next = text.find_first_not_of(kSpace, end);
        if (next == std::string_view::npos) break;
        if (text.substr(next).starts_with(kMarker)) {
            at = next;
            continue;
        }
        std::string_view rest = text.substr(next);
        if (rest.starts_with(kEos)) rest.remove_prefix(kEos.size());
        append_content(out, rest);
        break;
    }
    return out;
}

bool detect(std::string_view src) {
    return has(src, "[TOOL_CALLS]");
}

constexpr std::string_view kVllmParsers[] = {"mistral"};
constexpr std::string_view kAnywhere[] = {"[TOOL_CALLS]"};

// One function: [TOOL_CALLS]N[ARGS]A; "required" over several: the older array form.
ForcedCall forced_call(const std::string& name, const nlohmann::json& params) {
    return {params, "[TOOL_CALLS]" + name + "[ARGS]", "", ""};
}

CallFrame forced_any(const std::string& name) {
    return {"[TOOL_CALLS][{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ", "}]"};
}

}  // namespace

extern const ToolFormatSpec kMistralToolFormat = {
    .name = "mistral",
    .detect = detect,
    .parse = parse_mistral,
    .vllm_parsers = kVllmParsers,
    .markers_anywhere = kAnywhere,
    .forced_call = forced_call,
    .forced_any = forced_any,
};

}  // namespace specula::tool_format
