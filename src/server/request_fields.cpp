// Request field policy: see request_fields.h.
#include "server/request_fields.h"

#include <string>
#include <string_view>

#include "server/api_error.h"

namespace specula {

namespace {

using json = nlohmann::json;

enum class Endpoint { both, chat, completions };

// The fields server/request.cpp parses (and the identifiers that change nothing).
struct Known {
    const char* name;
    Endpoint where;
};

const Known kImplemented[] = {
    {"model", Endpoint::both},
    {"messages", Endpoint::chat},
    {"prompt", Endpoint::completions},
    {"max_tokens", Endpoint::both},
    {"max_completion_tokens", Endpoint::both},  // an alias of max_tokens on completions too
    {"temperature", Endpoint::both},
    {"top_p", Endpoint::both},
    {"n", Endpoint::both},
    {"best_of", Endpoint::completions},
    {"stream", Endpoint::both},
    {"stream_options", Endpoint::both},
    {"stop", Endpoint::both},
    {"seed", Endpoint::both},
    {"presence_penalty", Endpoint::both},
    {"frequency_penalty", Endpoint::both},
    {"logit_bias", Endpoint::both},
    {"logprobs", Endpoint::both},
    {"top_logprobs", Endpoint::chat},
    {"echo", Endpoint::completions},
    {"response_format", Endpoint::both},
    {"top_k", Endpoint::both},
    {"min_p", Endpoint::both},
    {"repetition_penalty", Endpoint::both},
    {"repeat_penalty", Endpoint::both},
    {"repeat_last_n", Endpoint::both},
    {"ignore_eos", Endpoint::both},
    {"speculative", Endpoint::both},
    {"chat_template_kwargs", Endpoint::chat},
    {"reasoning_format", Endpoint::chat},
    {"tools", Endpoint::chat},  // server/request_tools.h
    {"tool_choice", Endpoint::chat},
    {"parallel_tool_calls", Endpoint::chat},
    // Identifiers for the client's own bookkeeping: they change nothing about the output.
    {"user", Endpoint::both},
    {"safety_identifier", Endpoint::chat},
    {"prompt_cache_key", Endpoint::chat},
};

// Why each OpenAI field this server does not act on is refused.
struct Refused {
    const char* name;
    const char* why;
};

const Refused kRefused[] = {
    {"tools", "tool calling is supported on /v1/chat/completions only"},
    {"functions", "the legacy functions field is not supported (use tools)"},
    {"tool_choice", "tool calling is supported on /v1/chat/completions only"},
    {"function_call", "the legacy function_call field is not supported (use tool_choice)"},
    {"parallel_tool_calls", "tool calling is supported on /v1/chat/completions only"},
    {"audio", "audio output is not supported"},
    {"modalities", "only [\"text\"] output is supported"},
    {"prediction", "predicted outputs are not supported"},
    {"reasoning_effort", "this server runs no reasoning model"},
    {"verbosity", "verbosity control is not supported"},
    {"web_search_options", "web search is not supported"},
    {"metadata", "completions are not stored, so they carry no metadata"},
    {"store", "completions are not stored (only store: false is accepted)"},
    {"service_tier", "there is one service tier (only \"auto\" or \"default\" is accepted)"},
    {"suffix", "infilling (suffix) is not supported"},
};

bool applies(Endpoint e, bool chat) {
    return e == Endpoint::both || (e == Endpoint::chat) == chat;
}

// The harmless values of fields that are otherwise refused.
bool harmless(std::string_view name, const json& v) {
    if (name == "tools" || name == "functions") return v.is_array() && v.empty();
    if (name == "tool_choice" || name == "function_call") return v == "none";
    if (name == "parallel_tool_calls") return v.is_boolean();  // tools are refused anyway
    if (name == "modalities") return v == json::array({"text"});
    if (name == "store") return v == false;
    if (name == "service_tier") return v == "auto" || v == "default";
    return false;
}

}  // namespace

void check_request_fields(const json& body, bool chat) {
    if (!body.is_object()) return;  // parse_completion_request says so
    for (const auto& [name, value] : body.items()) {
        if (value.is_null()) continue;  // the same as absent, as in OpenAI's API
        bool known = false;
        for (const Known& k : kImplemented)
            if (name == k.name && applies(k.where, chat)) known = true;
        if (known) continue;
        for (const Refused& r : kRefused) {
            if (name != r.name) continue;
            if (harmless(name, value)) {
                known = true;
                break;
            }
            bad_request("'" + name + "' is not supported by this server: " + r.why, name);
        }
        if (known) continue;
        bad_request("unknown field '" + name + "' for " +
                        (chat ? "/v1/chat/completions" : "/v1/completions"),
                    name);
    }
}

}  // namespace specula
