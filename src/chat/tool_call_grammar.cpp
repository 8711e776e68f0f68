// Forced tool calls' grammars: see tool_call_grammar.h.
#include "chat/tool_call_grammar.h"

#include "common/error.h"

namespace specula {

namespace {

using json = nlohmann::json;

json object_of(const char* args_key, json name, json args) {
    return {{"type", "object"},
            {"properties", {{"name", std::move(name)}, {args_key, std::move(args)}}},
            {"required", {"name", args_key}},
            {"additionalProperties", false}};
}

}  // namespace

std::shared_ptr<const JsonGrammar> tool_call_grammar(ToolCallFormat f,
                                                     const nlohmann::ordered_json& tools,
                                                     const std::string& name) {
    const char* fmt = tool_call_format_name(f);
    if (f == ToolCallFormat::qwen3_coder)
        fail("tool_choice: forcing a call is not supported for the ", fmt,
             " format (its calls are XML, not JSON)");
    json names = json::array(), params;
    for (const auto& t : tools) {
        const auto& fn = t.at("function");
        const std::string n = fn.at("name").get<std::string>();
        names.push_back(n);
        if (name.empty() ? tools.size() == 1 : n == name)
            params = fn.contains("parameters") && !fn["parameters"].is_null()
                         ? json::parse(fn["parameters"].dump())
                         : json{{"type", "object"}};
    }
    if (!name.empty() && params.is_null())
        fail("tool_choice: the function '", name, "' is not among the tools");
    const bool one = !params.is_null();
    const std::string only = one ? (name.empty() ? names[0].get<std::string>() : name) : "";
    if (!one) params = {{"type", "object"}};
    const json name_schema = one ? json{{"const", only}} : json{{"enum", names}};
    json schema;
    std::string prefix, suffix;
    switch (f) {
        case ToolCallFormat::hermes:
            schema = object_of("arguments", name_schema, params);
            prefix = "<tool_call>\n";
            suffix = "\n</tool_call>";
            break;
        case ToolCallFormat::llama3:
            schema = object_of("parameters", name_schema, params);
            break;
        case ToolCallFormat::mistral:
            if (one) {
                schema = params;
                prefix = "[TOOL_CALLS]" + only + "[ARGS]";
            } else {
                schema = {{"type", "array"},
                          {"items", object_of("arguments", name_schema, params)},
                          {"minItems", 1},
                          {"maxItems", 1}};
                prefix = "[TOOL_CALLS]";
            }
            break;
        case ToolCallFormat::harmony:
            if (!one)
                fail("tool_choice: \"required\" over several tools is not supported for the ", fmt,
                     " format (name one function)");
            schema = params;
            prefix = "<|channel|>commentary to=functions." + only + " <|constrain|>json<|message|>";
            break;
        case ToolCallFormat::qwen3_coder:
            break;
    }
    // One whitespace byte between tokens: room for the spaces models write (", ", ": ") but not
    // for filler, which a small model can otherwise write until max_tokens.
    JsonGrammarOptions opt;
    opt.max_ws = 1;
    auto g = std::make_shared<JsonGrammar>(*json_schema_grammar(schema, opt));
    g->prefix = std::move(prefix);
    g->suffix = std::move(suffix);
    return g;
}

}  // namespace specula
