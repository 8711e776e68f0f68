// THE table of request fields of POST /v1/completions, /v1/chat/completions and llama-server's
// /completion (request_fields.cpp): every field a client may send is in one of three lists, so
// that none is ever silently ignored and nothing a llama-server or vLLM client sends by habit is
// refused for being foreign.
//
// 1. Implemented (parsed by server/protocol/request.h): OpenAI's model, prompt / messages,
//    max_tokens, max_completion_tokens, temperature, top_p, n, best_of (equal to n), stream,
//    stream_options (include_usage), stop, seed, presence_penalty, frequency_penalty, logit_bias,
//    logprobs, top_logprobs (chat), echo (completions), response_format, tools / tool_choice (auto,
//    none, required, a named function) / parallel_tool_calls (chat,
//    server/protocol/request_tools.h); llama-server's n_predict (= max_tokens), n_probs (=
//    logprobs), json_schema (= response_format json_schema), top_k, min_p, typical_p,
//    top_n_sigma, repeat_penalty,
//    repeat_last_n, dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n,
//    dry_sequence_breakers, xtc_probability, xtc_threshold, ignore_eos, timings_per_token,
//    reasoning_format, chat_template_kwargs;
//    vLLM's repetition_penalty, guided_json (= a json_schema grammar), include_stop_str_in_output,
//    stop_token_ids, add_generation_prompt and continue_final_message (chat), speculative.
// 2. Neutral: accepted because their value changes nothing Specula outputs; refused by name (400)
//    at any other value. E.g. cache_prompt (any: the slot's cache is always reused, which changes
//    no token), tfs_z 1, mirostat 0,
//    dynatemp_range 0, penalize_nl false, n_keep, id_slot,
//    samplers (when it keeps Specula's order), min_tokens 0, skip_special_tokens true,
//    identifiers (user, request_id, ...), store
//    false, service_tier auto, and OpenAI's tools on /v1/completions when empty.
// 3. Anything else, refused by name: a known field at a value Specula does not implement says why.
#pragma once

#include <nlohmann/json.hpp>

namespace specula {

// Throws ApiError 400 naming (`param`) the first field that this server does not act on.
void check_request_fields(const nlohmann::json& body, bool chat);

}  // namespace specula
