// Qwen3-Coder XML tool calls (see tool_calls.h):
//   <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>
// A value is text for a parameter the tool's schema types "string", JSON (when it parses) for
// any other; the newline the template writes around a value is not part of it.
#include "chat/tool_format.h"

namespace specula::tool_format {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>",
                           kFunction = "<function=", kFunctionEnd = "</function>",
                           kParam = "<parameter=", kParamEnd = "</parameter>";

// The JSON-schema type of tool `name`'s parameter `param` ("" when not known).
std::string param_type(const ojson& tools, const std::string& name, const std::string& param) {
    if (!tools.is_array()) return "";
    for (const ojson& t : tools) {
        const auto f = t.find("function");
        if (f == t.end() || !f->is_object() || f->value("name", ojson()) != name) continue;
        const auto p = f->find("parameters");
        if (p == f->end() || !p->is_object()) return "";
        const auto props = p->find("properties");
        if (props == p->end() || !props->is_object()) return "";
        const auto s = props->find(param);
        if (s == props->end() || !s->is_object()) return "";
        const auto type = s->find("type");
        return type != s->end() && type->is_string() ? type->get<std::string>() : "";
    }
    return "";
}

std::string_view strip_newlines(std::string_view v) {
    if (v.starts_with("\r\n"))
        v.remove_prefix(2);
    else if (v.starts_with('\n'))
        v.remove_prefix(1);
    if (v.ends_with("\r\n"))
        v.remove_suffix(2);
    else if (v.ends_with('\n'))
        v.remove_suffix(1);
    return v;
}

size_t skip_space(std::string_view s, size_t at) {
    const size_t n = s.find_first_not_of(kSpace, at);
    return n == std::string_view::npos ? s.size() : n;
}

// One <function=...>...</function> at text[at]; its end, or npos when malformed or cut off.
size_t parse_function(std::string_view text, size_t at, const ojson& tools, ToolCall& out) {
    if (!text.substr(at).starts_with(kFunction)) return std::string_view::npos;
    const size_t name_end = text.find('>', at + kFunction.size());
    if (name_end == std::string_view::npos) return name_end;
    out.name = trim(text.substr(at + kFunction.size(), name_end - at - kFunction.size()));
    if (out.name.empty()) return std::string_view::npos;
    ojson args = ojson::object();
    at = skip_space(text, name_end + 1);
    while (text.substr(at).starts_with(kParam)) {
        const size_t key_end = text.find('>', at + kParam.size());
        if (key_end == std::string_view::npos) return key_end;
        const std::string key = trim(text.substr(at + kParam.size(), key_end - at - kParam.size()));
        const size_t value_end = text.find(kParamEnd, key_end + 1);
        if (key.empty() || value_end == std::string_view::npos) return std::string_view::npos;
        const std::string_view value =
            strip_newlines(text.substr(key_end + 1, value_end - key_end - 1));
        ojson v = ojson(value);  // text, unless the schema allows JSON and it parses
        if (param_type(tools, out.name, key) != "string") {
            ojson parsed = ojson::parse(value, nullptr, /*allow_exceptions=*/false);
            if (!parsed.is_discarded()) v = std::move(parsed);
        }
        args[key] = std::move(v);
        at = skip_space(text, value_end + kParamEnd.size());
    }
    if (!text.substr(at).starts_with(kFunctionEnd)) return std::string_view::npos;
    // Model output may be any bytes: invalid UTF-8 in a key or a text value becomes U+FFFD.
    out.arguments = args.dump(-1, ' ', false, ojson::error_handler_t::replace);
    return at + kFunctionEnd.size();
}

ParsedToolCalls parse_qwen3_coder(std::string_view text, const ojson& tools) {
    size_t at = text.find(kOpen);
    if (at == std::string_view::npos) return as_content(text);
    ParsedToolCalls out;
    out.content = trim_right(text.substr(0, at));
    while (true) {
        ToolCall call;
        const size_t end = parse_function(text, skip_space(text, at + kOpen.size()), tools, call);
        if (end == std::string_view::npos) return as_content(text);
        out.calls.push_back(std::move(call));
        at = skip_space(text, end);
        if (at == text.size()) break;  // cut off before </tool_call>: the function is complete
        if (!text.substr(at).starts_with(kClose)) return as_content(text);
        at = skip_space(text, at + kClose.size());
        if (text.substr(at).starts_with(kOpen)) continue;
        append_content(out, text.substr(at));
        break;
    }
    return out;
}

bool detect(std::string_view src) {
    return has(src, "<function=") && has(src, "<parameter=");
}

constexpr std::string_view kVllmParsers[] = {"qwen3_coder"};
constexpr std::string_view kAnywhere[] = {"<tool_call>"};

}  // namespace

extern const ToolFormatSpec kQwen3CoderToolFormat = {
    .name = "qwen3-coder",
    .detect = detect,
    .parse = parse_qwen3_coder,
    .vllm_parsers = kVllmParsers,
    .markers_anywhere = kAnywhere,
    .no_forced_call = "its calls are XML, not JSON",
};

}  // namespace specula::tool_format
