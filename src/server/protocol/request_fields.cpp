// Request field policy: see request_fields.h. The three tables below are the whole policy.
#include "server/protocol/request_fields.h"

#include <string>
#include <string_view>

#include "server/protocol/api_error.h"

namespace specula {

namespace {

using json = nlohmann::json;

enum class Endpoint { both, chat, completions };

// 1. The fields server/protocol/request.cpp parses.
struct Implemented {
    const char* name;
    Endpoint where;
};

const Implemented kImplemented[] = {
    // OpenAI
    {"model", Endpoint::both},  // any name: the one served model answers
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
    {"prompt_logprobs", Endpoint::both},  // vLLM's
    {"response_format", Endpoint::both},
    {"tools", Endpoint::chat},  // server/protocol/request_tools.h
    {"tool_choice", Endpoint::chat},
    {"parallel_tool_calls", Endpoint::chat},
    // llama-server
    {"n_predict", Endpoint::both},    // = max_tokens
    {"n_probs", Endpoint::both},      // = logprobs (chat: top_logprobs)
    {"json_schema", Endpoint::both},  // = response_format json_schema
    {"top_k", Endpoint::both},
    {"min_p", Endpoint::both},
    {"typical_p", Endpoint::both},
    {"top_n_sigma", Endpoint::both},
    {"repeat_penalty", Endpoint::both},
    {"repeat_last_n", Endpoint::both},
    {"dry_multiplier", Endpoint::both},  // DRY (sampling/dry.h)
    {"dry_base", Endpoint::both},
    {"dry_allowed_length", Endpoint::both},
    {"dry_penalty_last_n", Endpoint::both},
    {"dry_sequence_breakers", Endpoint::both},
    {"xtc_probability", Endpoint::both},  // XTC (sampling/sampler.h)
    {"xtc_threshold", Endpoint::both},
    {"ignore_eos", Endpoint::both},
    {"timings_per_token", Endpoint::both},
    {"reasoning_format", Endpoint::chat},
    {"chat_template_kwargs", Endpoint::chat},
    {"reasoning_effort", Endpoint::chat},  // the template's thinking switch (Service::prepare)
    // vLLM
    {"repetition_penalty", Endpoint::both},
    {"guided_json", Endpoint::both},  // = response_format json_schema
    {"add_generation_prompt", Endpoint::chat},
    {"include_stop_str_in_output", Endpoint::both},
    {"stop_token_ids", Endpoint::both},
    {"continue_final_message", Endpoint::chat},
    {"speculative", Endpoint::both},  // Specula's own: {"num_speculative_tokens": N, "trace": bool}
};

// 2. Fields accepted at the values that change nothing Specula outputs, refused by name (with
// `why`) at any other. `neutral` null: never accepted (refused whatever the value).
struct Neutral {
    const char* name;
    bool (*neutral)(const json&);
    const char* why;
};

bool is_true(const json& v) {
    return v == true;
}
bool is_false(const json& v) {
    return v == false;
}
bool is_zero(const json& v) {
    return v.is_number() && v.get<double>() == 0;
}
bool is_one(const json& v) {
    return v.is_number() && v.get<double>() == 1;
}
bool is_bool(const json& v) {
    return v.is_boolean();
}
bool is_number(const json& v) {
    return v.is_number();
}
bool is_string(const json& v) {
    return v.is_string();
}
bool empty_array(const json& v) {
    return v.is_array() && v.empty();
}
bool empty_text(const json& v) {
    return v.is_string() && v.get<std::string>().empty();
}

// llama-server's `samplers` (names, or its one-letter string such as "edskypmxt"): neutral when
// it keeps top_k, top_p, min_p and temperature, and top_n_sigma and typ_p where it lists them, in
// Specula's order (sampling/sampler.h: top-n-sigma, top-k, typical, top-p, min-p, temperature),
// dry (if listed) before them all, xtc (if listed) right before temperature; the others it lists
// (penalties, ...) do nothing. With DRY or XTC on, samplers must list it
// (server/protocol/request.cpp).
bool default_sampler_order(const json& v) {
    std::string order;  // d s k y p m x t in the order given
    const auto add = [&](std::string_view name) {
        if (name == "dry" || name == "d") order += 'd';
        if (name == "xtc" || name == "x") order += 'x';
        if (name == "top_n_sigma" || name == "s") order += 's';
        if (name == "top_k" || name == "k") order += 'k';
        if (name == "typ_p" || name == "typical_p" || name == "typical" || name == "y")
            order += 'y';
        if (name == "top_p" || name == "nucleus" || name == "p") order += 'p';
        if (name == "min_p" || name == "m") order += 'm';
        if (name == "temperature" || name == "temp" || name == "t") order += 't';
    };
    if (v.is_string()) {
        for (char c : v.get<std::string>()) add(std::string_view(&c, 1));
    } else if (v.is_array()) {
        for (const json& s : v) {
            if (!s.is_string()) return false;
            add(s.get<std::string>());
        }
    } else {
        return false;
    }
    // DRY goes with the penalties, before the Sampler's transforms (sampling/constraints.h).
    if (!order.empty() && order[0] == 'd') order.erase(0, 1);
    // XTC goes between min-p and temperature.
    if (order.size() >= 2 && order.compare(order.size() - 2, 2, "xt") == 0)
        order.erase(order.size() - 2, 1);
    return order == "kpmt" || order == "skpmt" || order == "kypmt" || order == "skypmt";
}

const Neutral kNeutral[] = {
    // llama-server: the prompt cache, slots and reporting (no effect on the tokens).
    {"cache_prompt", is_bool, "must be a boolean"},
    {"id_slot", is_number, "must be a slot number (any slot gives the same output)"},
    {"n_keep", is_number, "must be a number (context shifting is not done: a full context stops)"},
    {"return_tokens", is_false, "token ids in the reply are not supported"},
    {"return_progress", is_false, "prompt progress reports are not supported"},
    {"post_sampling_probs", is_false, "post-sampling probabilities are not supported"},
    {"t_max_predict_ms", is_zero, "a time limit on generation is not supported"},
    {"t_max_prompt_ms", is_zero, "a time limit on the prompt is not supported"},
    {"n_indent", is_zero, "indentation limits are not supported"},
    {"n_cmpl", is_one, "only one completion per request is supported this way (use n)"},
    // llama-server's samplers Specula does not have, at the values that turn them off.
    {"tfs_z", is_one, "tail-free sampling is not supported (only tfs_z 1)"},
    {"mirostat", is_zero, "mirostat sampling is not supported (only mirostat 0)"},
    {"mirostat_tau", is_number, "must be a number (mirostat is off)"},
    {"mirostat_eta", is_number, "must be a number (mirostat is off)"},
    {"dynatemp_range", is_zero, "dynamic temperature is not supported (only dynatemp_range 0)"},
    {"dynatemp_exponent", is_number, "must be a number (dynamic temperature is off)"},
    {"penalize_nl", is_false, "penalize_nl is not supported (only false, llama.cpp's default)"},
    {"min_keep", is_zero, "min_keep is not supported (only 0)"},
    {"samplers", default_sampler_order,
     "only the order dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature is supported "
     "(other samplers are off)"},
    {"grammar", empty_text, "GBNF grammars are not supported (use json_schema)"},
    {"lora", empty_array, "LoRA adapters are not supported"},
    // vLLM's extra_body fields at their defaults.
    {"skip_special_tokens", is_true, "special tokens' text is never in the output (only true)"},
    {"spaces_between_special_tokens", is_true, "only true is supported"},
    {"min_tokens", is_zero, "min_tokens is not supported (only 0)"},
    {"guided_choice", nullptr, "guided_choice is not supported (use guided_json or json_schema)"},
    {"guided_regex", nullptr, "regex-guided decoding is not supported (use guided_json)"},
    {"guided_grammar", nullptr, "grammar-guided decoding is not supported (use guided_json)"},
    {"guided_decoding_backend", is_string, "must be a string"},
    {"use_beam_search", is_false, "beam search is not supported"},
    {"length_penalty", is_one, "length_penalty applies to beam search, which is not supported"},
    {"truncate_prompt_tokens", nullptr, "prompts are never truncated (a long one is refused)"},
    {"allowed_token_ids", nullptr, "allowed_token_ids is not supported (use logit_bias)"},
    {"bad_words", empty_array, "bad_words is not supported (use logit_bias)"},
    {"priority", is_zero, "request priorities are not supported (only 0)"},
    {"return_tokens_as_token_ids", is_false, "only false is supported"},
    {"documents", nullptr, "documents (RAG templates) are not supported"},
    {"chat_template", nullptr,
     "a per-request chat template is not supported (serve --chat-template-file)"},
    // Identifiers for the client's own bookkeeping.
    {"user", is_string, "must be a string"},
    {"request_id", is_string, "must be a string"},
    {"safety_identifier", is_string, "must be a string"},
    {"prompt_cache_key", is_string, "must be a string"},
    // OpenAI fields, at the values that ask for nothing this server lacks.
    {"functions", empty_array, "the legacy functions field is not supported (use tools)"},
    {"function_call", [](const json& v) { return v == "none"; },
     "the legacy function_call field is not supported (use tool_choice)"},
    {"modalities", [](const json& v) { return v == json::array({"text"}); },
     "only [\"text\"] output is supported"},
    {"store", is_false, "completions are not stored (only store: false is accepted)"},
    {"service_tier", [](const json& v) { return v == "auto" || v == "default"; },
     "there is one service tier (only \"auto\" or \"default\" is accepted)"},
    {"audio", nullptr, "audio output is not supported"},
    {"prediction", nullptr, "predicted outputs are not supported"},
    {"verbosity", nullptr, "verbosity control is not supported"},
    {"web_search_options", nullptr, "web search is not supported"},
    {"metadata", nullptr, "completions are not stored, so they carry no metadata"},
    {"suffix", nullptr, "infilling (suffix) is not supported"},
};

// 3. Fields implemented on chat only, as they arrive on /v1/completions: neutral when empty.
const Neutral kChatOnly[] = {
    {"tools", empty_array, "tool calling is supported on /v1/chat/completions only"},
    {"tool_choice", [](const json& v) { return v == "none"; },
     "tool calling is supported on /v1/chat/completions only"},
    {"parallel_tool_calls", is_bool, "tool calling is supported on /v1/chat/completions only"},
};

bool applies(Endpoint e, bool chat) {
    return e == Endpoint::both || (e == Endpoint::chat) == chat;
}

// Accepts `name` = `value` by `table`: true when listed and neutral, an ApiError when listed and
// not, false when not listed.
template <size_t N>
bool check_neutral(const Neutral (&table)[N], const std::string& name, const json& value) {
    for (const Neutral& f : table) {
        if (name != f.name) continue;
        if (f.neutral && f.neutral(value)) return true;
        bad_request(
            "'" + name + "' = " + value.dump() + " is not supported by this server: " + f.why,
            name);
    }
    return false;
}

}  // namespace

void check_request_fields(const json& body, bool chat) {
    if (!body.is_object()) return;  // parse_completion_request says so
    for (const auto& [name, value] : body.items()) {
        if (value.is_null()) continue;  // the same as absent, as in OpenAI's API
        bool known = false;
        for (const Implemented& k : kImplemented)
            if (name == k.name && applies(k.where, chat)) known = true;
        if (known) continue;
        if (!chat && check_neutral(kChatOnly, name, value)) continue;
        if (check_neutral(kNeutral, name, value)) continue;
        bad_request("unknown field '" + name + "' for " +
                        (chat ? "/v1/chat/completions" : "/v1/completions"),
                    name);
    }
}

}  // namespace specula
