// Hermes / Qwen <tool_call>{json}</tool_call> blocks (see tool_calls.h).
#include "chat/tool_format.h"

namespace specula::tool_format {

namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

bool parse_call(std::string_view body, ToolCall& out) {
    const auto j = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
    return !j.is_discarded() && call_from_json(j, out);
}

ParsedToolCalls parse_hermes(std::string_view text, const nlohmann::ordered_json& /*tools*/) {
    size_t at = text.find(kOpen);
    if (at == std::string_view::npos) return as_content(text);
    ParsedToolCalls out;
    out.content = trim_right(text.substr(0, at));
    while (at != std::string_view::npos) {
        const size_t body = at + kOpen.size();
        const size_t close = text.find(kClose, body);
        ToolCall call;
        if (!parse_call(text.substr(body, close == std::string_view::npos ? std::string_view::npos
                                                                          : close - body),
                        call))
            return as_content(text);
        out.calls.push_back(std::move(call));
        if (close == std::string_view::npos) break;
        const size_t next = text.find_first_not_of(kSpace, close + kClose.size());
        if (next == std::string_view::npos) break;
        if (text.substr(next).starts_with(kOpen)) {
            at = next;
            continue;
        }
        append_content(out, text.substr(next));  // text after the calls
        break;
    }
    return out;
}

bool detect(std::string_view src) {
    return has(src, "<tool_call>");
}

constexpr std::string_view kVllmParsers[] = {"hermes", "qwen"};
constexpr std::string_view kAnywhere[] = {"<tool_call>"};

ForcedCall forced_call(const std::string& name, const nlohmann::json& params) {
    return {call_object_schema("arguments", {{"const", name}}, params), "<tool_call>\n",
            "\n</tool_call>", "/properties/arguments"};
}

CallFrame forced_any(const std::string& name) {
    return {"<tool_call>\n{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ",
            "}\n</tool_call>"};
}

}  // namespace

extern const ToolFormatSpec kHermesToolFormat = {
    .name = "hermes",
    .detect = detect,
    .parse = parse_hermes,
    .vllm_parsers = kVllmParsers,
    .markers_anywhere = kAnywhere,
    .forced_call = forced_call,
    .forced_any = forced_any,
};

}  // namespace specula::tool_format
