// Forced tool calls' grammars: see tool_call_grammar.h.
#include "chat/tool_call_grammar.h"

#include <string>
#include <vector>

#include "chat/tool_format.h"
#include "common/error.h"

namespace specula {

using json = nlohmann::json;

std::shared_ptr<const JsonGrammar> tool_call_grammar(ToolCallFormat f,
                                                     const nlohmann::ordered_json& tools,
                                                     const std::string& name) {
    const ToolFormatSpec& spec = *f.spec;
    if (!spec.forced_call || !spec.forced_any)
        fail("tool_choice: forcing a call is not supported for the ", spec.name, " format (",
             spec.no_forced_call, ")");
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
    // One whitespace byte between tokens: room for the spaces models write (", ", ": ") but not
    // for filler, which a small model can otherwise write until max_tokens.
    JsonGrammarOptions opt;
    opt.max_ws = 1;
    if (params.is_null()) {
        // "required" over several tools: the call names its function first, and the arguments
        // follow under that function's schema (one alternative per tool, told apart by name).
        std::vector<FramedSchema> list;
        for (size_t i = 0; i < names.size(); ++i) {
            tool_format::CallFrame frame = spec.forced_any(names[i]);
            list.push_back({std::move(frame.prefix), &all_params[i], std::move(frame.suffix)});
        }
        return json_schema_alternatives(list, opt);
    }
    tool_format::ForcedCall call = spec.forced_call(name.empty() ? names[0] : name, params);
    auto g = std::make_shared<JsonGrammar>(*json_schema_grammar(call.schema, opt, call.params_at));
    g->prefix = std::move(call.prefix);
    g->suffix = std::move(call.suffix);
    return g;
}

}  // namespace specula
