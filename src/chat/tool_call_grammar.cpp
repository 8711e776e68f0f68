// Forced tool calls' grammars: see tool_call_grammar.h.
#include "chat/tool_call_grammar.h"

#include <string>
#include <vector>

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
    std::vector<std::string> names;
    std::vector<json> all_params;
    json params;
    for (const auto& t : tools) {
        const auto& fn = t.at("function");
        const std::string n = fn.at("name").get<std::string>();
        for (const std::string& earlier : names)
            if (earlier == n) fail("tools: two functions are named '", n, "'");
        names.push_back(n);
        all_params.push_back(fn.contains("parameters") && !fn["parameters"].is_null()
                                 ? json::parse(fn["parameters"].dump())
                                 : json{{"type", "object"}});
        if (name.empty() ? tools.size() == 1 : n == name) params = all_params.back();
    }
    if (!name.empty() && params.is_null())
        fail("tool_choice: the function '", name, "' is not among the tools");
    const bool one = !params.is_null();
    const std::string only = one ? (name.empty() ? names[0] : name) : "";
    // One whitespace byte between tokens: room for the spaces models write (", ", ": ") but not
    // for filler, which a small model can otherwise write until max_tokens.
    JsonGrammarOptions opt;
    opt.max_ws = 1;
    if (!one) {
        // "required" over several tools: the call names its function first, and the arguments
        // follow under that function's schema (one alternative per tool, told apart by name).
        std::vector<FramedSchema> list;
        for (size_t i = 0; i < names.size(); ++i) {
            const std::string n = json(names[i]).dump();
            switch (f) {
                case ToolCallFormat::hermes:
                    list.push_back({"<tool_call>\n{\"name\": " + n + ", \"arguments\": ",
                                    &all_params[i], "}\n</tool_call>"});
                    break;
                case ToolCallFormat::llama3:
                    list.push_back({"{\"name\": " + n + ", \"parameters\": ", &all_params[i], "}"});
                    break;
                case ToolCallFormat::mistral:
                    list.push_back({"[TOOL_CALLS][{\"name\": " + n + ", \"arguments\": ",
                                    &all_params[i], "}]"});
                    break;
                case ToolCallFormat::harmony:
                    list.push_back({"<|channel|>commentary to=functions." + names[i] +
                                        " <|constrain|>json<|message|>",
                                    &all_params[i], ""});
                    break;
                case ToolCallFormat::qwen3_coder:
                    break;
            }
        }
        return json_schema_alternatives(list, opt);
    }
    const json name_schema = json{{"const", only}};
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
            schema = params;
            prefix = "[TOOL_CALLS]" + only + "[ARGS]";
            break;
        case ToolCallFormat::harmony:
            schema = params;
            prefix = "<|channel|>commentary to=functions." + only + " <|constrain|>json<|message|>";
            break;
        case ToolCallFormat::qwen3_coder:
            break;
    }
    auto g = std::make_shared<JsonGrammar>(*json_schema_grammar(schema, opt));
    g->prefix = std::move(prefix);
    g->suffix = std::move(suffix);
    return g;
}

}  // namespace specula
