// Tool-call formats: the choice, the shared helpers and the stream gate (see tool_calls.h).
#include "chat/tool_calls.h"

#include "chat/tool_format.h"
#include "common/error.h"

namespace specula {

using namespace tool_format;

const char* tool_call_format_name(ToolCallFormat f) {
    return f.spec->name;
}

std::string tool_call_format_names() {
    std::string names;
    for (const ToolFormatSpec* spec : tool_formats())
        names += std::string(names.empty() ? "" : ", ") + spec->name;
    return names;
}

std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name, const char* what) {
    if (name == "auto") return std::nullopt;
    for (const ToolFormatSpec* spec : tool_formats())
        if (name == spec->name) return ToolCallFormat{spec};
    fail(std::string(what) + ": unknown tool-call format '" + std::string(name) + "' (" +
         tool_call_format_names() + " or auto)");
}

ToolCallFormat tool_call_format_for_vllm_parser(std::string_view parser) {
    std::string names;
    for (const ToolFormatSpec* spec : tool_formats())
        for (std::string_view p : spec->vllm_parsers) {
            if (parser == p) return ToolCallFormat{spec};
            names += std::string(names.empty() ? "" : ", ") + std::string(p);
        }
    fail("--tool-call-parser ", parser, ": not supported; the parsers specula has are ", names,
         " (or --tool-call-format)");
}

std::optional<ToolCallFormat> detect_tool_call_format(std::string_view src) {
    for (const ToolFormatSpec* spec : tool_formats())
        if (spec->detect(src)) return ToolCallFormat{spec};
    return std::nullopt;
}

bool parses_without_tools(ToolCallFormat f) {
    return f.spec->parses_without_tools;
}

ParsedToolCalls parse_tool_calls(ToolCallFormat f, std::string_view text,
                                 const nlohmann::ordered_json& tools) {
    try {
        return f.spec->parse(text, tools);
    } catch (const std::exception& e) {  // a bug: the parsers are total (test_chat_model_output)
        fail("the ", f.spec->name, " tool-call parser failed on the model's output: ", e.what());
    }
}

ToolCallMarkers tool_call_markers(ToolCallFormat f) {
    ToolCallMarkers m;
    for (std::string_view s : f.spec->markers_anywhere) m.anywhere.emplace_back(s);
    for (std::string_view s : f.spec->markers_at_start) m.at_start.emplace_back(s);
    return m;
}

namespace tool_format {

nlohmann::json call_object_schema(const char* args_key, nlohmann::json name_schema,
                                  nlohmann::json args) {
    return {{"type", "object"},
            {"properties", {{"name", std::move(name_schema)}, {args_key, std::move(args)}}},
            {"required", {"name", args_key}},
            {"additionalProperties", false}};
}

std::string trim_right(std::string_view s) {
    const size_t last = s.find_last_not_of(kSpace);
    return std::string(s.substr(0, last == std::string_view::npos ? 0 : last + 1));
}

std::string trim(std::string_view s) {
    const size_t first = s.find_first_not_of(kSpace);
    return first == std::string_view::npos ? std::string() : trim_right(s.substr(first));
}

size_t json_extent(std::string_view s, size_t at) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = at; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
        }
    }
    return std::string_view::npos;
}

bool call_from_json(const nlohmann::ordered_json& j, ToolCall& out, const char* args_key,
                    const char* alt_key) {
    if (!j.is_object()) return false;
    const auto name = j.find("name");
    if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
    out.name = name->get<std::string>();
    auto args = j.find(args_key);
    if (args == j.end() && alt_key) args = j.find(alt_key);
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

void append_content(ParsedToolCalls& out, std::string_view rest) {
    const std::string r = trim(rest);
    if (r.empty()) return;
    if (!out.content.empty()) out.content += "\n";
    out.content += r;
}

}  // namespace tool_format

// The stream gate.

std::string ToolCallGate::release_before(size_t at) {
    std::string out = held_.substr(0, at);
    held_.erase(0, at);
    if (out.find_first_not_of(kSpace) != std::string::npos) released_ = true;
    return out;
}

ParsedToolCalls ToolCallGate::finish(const nlohmann::ordered_json& tools) {
    std::string rest = push("");
    ParsedToolCalls out = in_call_ ? parse_tool_calls(format_, held_, tools) : as_content(held_);
    held_.clear();
    if (in_call_ && out.as_text) {
        out.content.insert(0, dropped_);  // not a call after all: the text byte for byte
    } else if (in_call_ && (released_ || !rest.empty()) && !out.content.empty()) {
        out.content.insert(0, "\n");  // text after the calls, after the text before them
    }
    out.content.insert(0, rest);
    return out;
}

std::string ToolCallGate::push(std::string_view text) {
    held_ += text;
    if (in_call_) return "";
    if (!started_ && !markers_.at_start.empty()) {
        const size_t first = held_.find_first_not_of(kSpace);
        if (first == std::string::npos) return "";  // only whitespace so far
        const std::string_view rest = std::string_view(held_).substr(first);
        for (const std::string& m : markers_.at_start) {
            if (rest.starts_with(m)) {
                in_call_ = true;  // the leading whitespace stays: the parser sees it
                return "";
            }
            if (m.starts_with(rest)) return "";  // it may still become the marker
        }
        started_ = true;
    }
    size_t at = std::string::npos;
    for (const std::string& m : markers_.anywhere) at = std::min(at, held_.find(m));
    if (at != std::string::npos) {  // content ends here, without its trailing whitespace
        in_call_ = true;
        std::string out = trim_right(std::string_view(held_).substr(0, at));
        dropped_ = held_.substr(out.size(), at - out.size());
        held_.erase(0, at);
        if (!out.empty()) released_ = true;
        return out;
    }
    size_t keep = 0;  // a suffix that may start a marker
    for (const std::string& m : markers_.anywhere)
        for (size_t k = std::min(held_.size(), m.size() - 1); k > keep; --k)
            if (std::string_view(held_).substr(held_.size() - k) ==
                std::string_view(m).substr(0, k)) {
                keep = k;
                break;
            }
    // Whitespace before it is held too: it is dropped if a call follows.
    size_t from = held_.size() - keep;
    while (from > 0 && std::string_view(kSpace).find(held_[from - 1]) != std::string_view::npos)
        --from;
    return release_before(from);
}

}  // namespace specula
