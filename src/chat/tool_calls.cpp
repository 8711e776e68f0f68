// Hermes tool calls: see tool_calls.h.
#include "chat/tool_calls.h"

#include <nlohmann/json.hpp>

namespace specula {

namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
constexpr const char* kSpace = " \t\r\n";

bool parse_call(std::string_view body, ToolCall& out) {
    const auto j = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return false;
    const auto name = j.find("name");
    if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
    out.name = name->get<std::string>();
    const auto args = j.find("arguments");
    if (args == j.end() || args->is_null()) {
        out.arguments = "{}";
    } else if (args->is_object()) {
        out.arguments = args->dump();
    } else if (args->is_string()) {
        out.arguments = args->get<std::string>();
    } else {
        return false;
    }
    return true;
}

}  // namespace

bool template_uses_hermes_tools(std::string_view source) {
    return source.find(kOpen) != std::string_view::npos;
}

ParsedToolCalls parse_hermes_tool_calls(std::string_view text) {
    ParsedToolCalls none{std::string(text), {}};
    size_t at = text.find(kOpen);
    if (at == std::string_view::npos) return none;
    ParsedToolCalls out;
    out.content = std::string(text.substr(0, at));
    const size_t keep = out.content.find_last_not_of(kSpace);
    out.content.resize(keep == std::string::npos ? 0 : keep + 1);
    while (at != std::string_view::npos) {
        const size_t body = at + kOpen.size();
        const size_t close = text.find(kClose, body);
        ToolCall call;
        if (!parse_call(text.substr(body, close == std::string_view::npos ? std::string_view::npos
                                                                          : close - body),
                        call))
            return none;
        out.calls.push_back(std::move(call));
        if (close == std::string_view::npos) break;
        const size_t next = text.find_first_not_of(kSpace, close + kClose.size());
        if (next == std::string_view::npos) break;
        if (text.substr(next).starts_with(kOpen)) {
            at = next;
            continue;
        }
        // Text after the calls: kept as content.
        if (!out.content.empty()) out.content += "\n";
        out.content += text.substr(next);
        break;
    }
    return out;
}

std::string ToolCallGate::push(std::string_view text) {
    held_ += text;
    if (in_call_) return "";
    const size_t at = held_.find(kOpen);
    if (at != std::string::npos) {  // content ends here, without its trailing whitespace
        in_call_ = true;
        std::string out = held_.substr(0, at);
        const size_t last = out.find_last_not_of(kSpace);
        out.resize(last == std::string::npos ? 0 : last + 1);
        held_.erase(0, at);
        return out;
    }
    size_t keep = 0;  // a suffix that may start "<tool_call>"
    for (size_t k = std::min(held_.size(), kOpen.size() - 1); k > 0; --k) {
        if (std::string_view(held_).substr(held_.size() - k) == kOpen.substr(0, k)) {
            keep = k;
            break;
        }
    }
    // Whitespace before it is held too: it is dropped if a call follows.
    size_t from = held_.size() - keep;
    while (from > 0 && std::string_view(kSpace).find(held_[from - 1]) != std::string_view::npos)
        --from;
    std::string out = held_.substr(0, from);
    held_.erase(0, from);
    return out;
}

}  // namespace specula
