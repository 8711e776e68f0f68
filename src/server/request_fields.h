// The request fields of POST /v1/completions and /v1/chat/completions, each either implemented or
// refused: check_request_fields() throws ApiError 400 naming the first field (`param`) that this
// server does not act on, so that no field is ever silently ignored.
//
// Implemented (parsed by server/request.h): model, prompt / messages, max_tokens,
// max_completion_tokens, temperature, top_p, n, best_of (equal to n), stream, stream_options
// (include_usage), stop, seed, presence_penalty, frequency_penalty, logit_bias, logprobs,
// top_logprobs (chat), echo (completions), response_format, and the vLLM / llama-server extras
// top_k, min_p, repetition_penalty (repeat_penalty), repeat_last_n, ignore_eos, speculative,
// chat_template_kwargs and reasoning_format (chat).
// Accepted because they change nothing about the output: user, safety_identifier,
// prompt_cache_key (identifiers), store: false, service_tier "auto" / "default", modalities
// ["text"], functions: [], function_call "none"; on completions tool_choice "none", tools: []
// and parallel_tool_calls. Chat implements tools, tool_choice (auto / none / required / named) and
// parallel_tool_calls (server/request_tools.h).
// Refused: functions, function_call (legacy), audio and other
// modalities, prediction, reasoning_effort, verbosity, web_search_options, metadata and
// store: true (nothing is stored), suffix (no infilling), other service tiers, and any field
// this server does not know.
#pragma once

#include <nlohmann/json.hpp>

namespace specula {

void check_request_fields(const nlohmann::json& body, bool chat);

}  // namespace specula
