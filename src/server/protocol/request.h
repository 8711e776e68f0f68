// Parsing and validating the JSON bodies of POST /v1/completions, /v1/chat/completions and
// llama-server's /completion (its native fields map onto the same request).
// Every malformed, missing or wrong-typed field is an ApiError 400 naming the field (`param`), and
// so is every field this server does not act on (server/protocol/request_fields.h); limits that
// need the model (context size, vocabulary, draft length) are checked later by the Service.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "sampling/json_grammar.h"
#include "sampling/penalties.h"

namespace specula {

struct CompletionRequest {
    bool chat = false;
    std::string model;                  // "" when the client did not name one
    std::string prompt;                 // completions: the prompt text
    std::vector<int32_t> prompt_ids;    // completions: a prompt given as token ids
    std::vector<ChatMessage> messages;  // chat
    // chat: the messages as the chat template sees them ({"role", "content"} each), and
    // chat_template_kwargs (null when not given), merged into the template's context.
    nlohmann::ordered_json chat_messages;
    nlohmann::ordered_json chat_template_kwargs;
    nlohmann::ordered_json tools;  // chat: null when none (server/protocol/request_tools.h)
    bool parallel_tool_calls = true;
    // chat: tool_choice "required" (name "") or a named function: a call is forced.
    bool tool_forced = false;
    std::string tool_forced_name;
    std::string reasoning_format;  // chat: "none", "deepseek" or "auto"; "": the server's default
    // chat: OpenAI's reasoning_effort (none, minimal, low, medium, high, xhigh); "": not given.
    std::string reasoning_effort;
    // Set by the agents' API adapters (not a request field): a max_tokens past the context is
    // cut to what the prompt leaves, and reasoning_effort on a template without a thinking
    // switch changes nothing instead of being refused.
    bool lenient_limits = false;
    // chat (vLLM): add_generation_prompt false renders without the assistant's opening;
    // continue_final_message renders the last (assistant) message open, so the reply continues it.
    bool add_generation_prompt = true, continue_final_message = false;
    int64_t max_tokens = -1;   // (n_predict) -1: until the end of generation or a full context
                               // (64-bit, so that adding the prompt's length to it cannot overflow)
    float temperature = 0.8f;  // llama-server's sampling defaults
    int top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float typical_p = 1.0f;                              // llama-server's (1: off)
    float top_n_sigma = -1.0f;                           // llama-server's (<= 0: off)
    float xtc_probability = 0.0f, xtc_threshold = 0.1f;  // llama-server's XTC (0: off)
    uint64_t seed = 0xFFFFFFFFu;                         // random
    std::vector<std::string> stop;
    bool include_stop_str = false;        // vLLM's include_stop_str_in_output
    std::vector<int32_t> stop_token_ids;  // vLLM's (checked against the vocabulary later)
    bool stream = false;
    bool ignore_eos = false;
    std::optional<int> n_draft;      // "speculative": {"num_speculative_tokens": N}
    bool trace = false;              // "speculative": {"trace": true}: each choice's draft trace
    int n = 1;                       // choices, generated one after another
    bool include_usage = false;      // stream_options.include_usage
    bool timings_per_token = false;  // llama-server's: every streamed chunk carries `timings`
    bool echo = false;               // completions: the prompt's text (and logprobs) come first
    // Logprobs of each generated token and this many alternatives (chat: top_logprobs;
    // completions: logprobs N); -1: no logprobs.
    int logprobs = -1;
    // vLLM's prompt_logprobs N: each prompt token's logprob, rank and N alternatives (the first
    // token has none); -1: not asked. Not with stream (as vLLM).
    int prompt_logprobs = -1;
    // Penalties (sampling/penalties.h); logit_bias is filled in by the Service from
    // logit_bias_json, which needs the vocabulary to check token ids.
    PenaltyParams penalties{};
    nlohmann::json logit_bias_json;  // null: none
    // response_format json_object / json_schema, llama-server's json_schema, vLLM's guided_json
    std::shared_ptr<const JsonGrammar> grammar;
};

// The server-wide defaults of a request's sampling fields (llama-server's --temp, --top-k,
// --top-p, --min-p, --seed, -n, the penalties): a field the request sends wins.
struct RequestDefaults {
    int64_t max_tokens = -1;  // -n
    float temperature = 0.8f, top_p = 0.95f, min_p = 0.05f;
    float typical_p = 1.0f, top_n_sigma = -1.0f;         // --typical, --top-nsigma
    float xtc_probability = 0.0f, xtc_threshold = 0.1f;  // --xtc-probability, --xtc-threshold
    int top_k = 40;
    uint64_t seed = 0xFFFFFFFFu;  // random
    float presence_penalty = 0.0f, frequency_penalty = 0.0f, repeat_penalty = 1.0f;
    // -1: the penalties count the whole output unless the request gives llama.cpp's
    // repeat_penalty (then 64, its window); given (--repeat-last-n): every request's window.
    int repeat_last_n = kRepeatLastNUnset;
    static constexpr int kRepeatLastNUnset = -2;
    DryParams dry;  // --dry-multiplier, --dry-base, ... (off unless given)
};

// Throws ApiError (400) for anything malformed. `raw`: the same body parsed keeping its key
// order (for the chat template); without it the order is lost.
CompletionRequest parse_completion_request(const nlohmann::json& body, bool chat,
                                           const nlohmann::ordered_json* raw = nullptr,
                                           const RequestDefaults& defaults = {});

}  // namespace specula
