// Tool-calling request fields: see request_tools.h.
#include "server/protocol/request_tools.h"

#include <string>
#include <vector>

#include "server/protocol/api_error.h"

namespace specula {

namespace {

using ojson = nlohmann::ordered_json;

const ojson* field(const ojson& o, const char* name) {
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return nullptr;
    return &*it;
}

[[noreturn]] void wrong(const std::string& param, const char* expected) {
    bad_request("'" + param + "' must be " + expected, param);
}

void check_function(const ojson& f, const std::string& param, bool call) {
    if (!f.is_object()) wrong(param, "an object");
    const ojson* name = field(f, "name");
    if (!name || !name->is_string() || name->get<std::string>().empty())
        wrong(param + ".name", "a non-empty string");
    if (call) {
        const ojson* args = field(f, "arguments");
        if (!args || !args->is_string()) wrong(param + ".arguments", "a JSON string");
        return;
    }
    if (const ojson* d = field(f, "description"); d && !d->is_string())
        wrong(param + ".description", "a string");
    if (const ojson* p = field(f, "parameters"); p && !p->is_object())
        wrong(param + ".parameters", "a JSON Schema object");
}

void check_type_function(const ojson& t, const std::string& param) {
    const ojson* type = field(t, "type");
    if (!type || *type != "function") wrong(param + ".type", "\"function\"");
}

}  // namespace

ToolFields get_tool_fields(const ojson& body) {
    ToolFields out;
    const ojson* tools = field(body, "tools");
    if (tools) {
        if (!tools->is_array()) wrong("tools", "an array of tools");
        for (size_t i = 0; i < tools->size(); ++i) {
            const ojson& t = (*tools)[i];
            const std::string param = "tools[" + std::to_string(i) + "]";
            if (!t.is_object()) wrong(param, "an object");
            check_type_function(t, param);
            const ojson* f = field(t, "function");
            if (!f) wrong(param + ".function", "an object");
            check_function(*f, param + ".function", false);
        }
        if (!tools->empty()) out.tools = *tools;
    }
    if (const ojson* choice = field(body, "tool_choice")) {
        if (*choice == "none") {
            out.tools = nullptr;
        } else if ((*choice == "auto" || *choice == "required") && out.tools.is_null()) {
            bad_request("'tool_choice' " + choice->dump() + " needs tools", "tool_choice");
        } else if (*choice == "required") {
            out.forced = true;
        } else if (choice->is_object()) {
            check_type_function(*choice, "tool_choice");
            const ojson* f = field(*choice, "function");
            const ojson* name = f && f->is_object() ? field(*f, "name") : nullptr;
            if (!name || !name->is_string()) wrong("tool_choice.function.name", "a string");
            if (out.tools.is_null())
                bad_request("'tool_choice' names a function but there are no tools", "tool_choice");
            bool known = false;
            for (const ojson& t : out.tools) known = known || t["function"]["name"] == *name;
            if (!known)
                bad_request("'tool_choice' names the function " + name->dump() +
                                ", which is not among the tools",
                            "tool_choice");
            out.forced = true;
            out.forced_name = name->get<std::string>();
        } else if (*choice != "auto") {
            wrong("tool_choice",
                  "\"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                  "\"function\": {\"name\": ...}}");
        }
    }
    if (const ojson* p = field(body, "parallel_tool_calls")) {
        if (!p->is_boolean()) wrong("parallel_tool_calls", "a boolean");
        out.parallel_tool_calls = p->get<bool>();
    }
    return out;
}

ojson template_messages(const ojson& messages, const std::vector<std::string>& texts) {
    ojson out = ojson::array();
    for (size_t i = 0; i < messages.size() && i < texts.size(); ++i) {
        const ojson& m = messages[i];
        const std::string param = "messages[" + std::to_string(i) + "]";
        ojson copy = m;
        if (copy["role"] == "developer") copy["role"] = "system";
        if (const ojson* c = field(m, "content"); c && !c->is_string()) copy["content"] = texts[i];
        if (const ojson* calls = field(m, "tool_calls")) {
            if (m["role"] != "assistant")
                bad_request("'" + param + ".tool_calls' is only allowed in assistant messages",
                            param + ".tool_calls");
            if (!calls->is_array()) wrong(param + ".tool_calls", "an array of tool calls");
            for (size_t j = 0; j < calls->size(); ++j) {
                const std::string cp = param + ".tool_calls[" + std::to_string(j) + "]";
                const ojson& call = (*calls)[j];
                if (!call.is_object()) wrong(cp, "an object");
                check_type_function(call, cp);
                const ojson* f = field(call, "function");
                if (!f) wrong(cp + ".function", "an object");
                check_function(*f, cp + ".function", true);
            }
        }
        if (m["role"] == "tool") {
            if (const ojson* id = field(m, "tool_call_id"); id && !id->is_string())
                wrong(param + ".tool_call_id", "a string");
        }
        out.push_back(std::move(copy));
    }
    return out;
}

}  // namespace specula
