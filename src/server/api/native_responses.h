// llama-server's own API beside the OpenAI one: the bodies of POST /completion (its native
// request is parsed by server/protocol/request.h like /v1/completions; n_predict, n_probs,
// cache_prompt ... are in the field table, server/protocol/request_fields.h), GET /props and GET
// /slots.
//
// /completion answers {"index", "content", "tokens": [], "id_slot", "stop": true, "model",
// "tokens_predicted", "tokens_evaluated", "generation_settings", "prompt", "has_new_line",
// "truncated": false, "stop_type": "eos" | "limit" | "word", "stopping_word", "tokens_cached",
// "timings"} (+ "completion_probabilities" with n_probs). Streamed, as llama-server streams it:
// `data: {"index", "content", "tokens": [], "stop": false, "id_slot", "tokens_predicted",
// "tokens_evaluated"}` per piece of text, then the whole object above (content "") as the last
// event; no [DONE].
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "server/api/responses.h"

namespace specula {

// The settings a /completion reply echoes (generation_settings; /props' defaults).
nlohmann::json generation_settings(const CompletionRequest& req, int n_ctx);

// One streamed piece of text (`c`: the choice so far, for its logprobs; `cursor` tracks them).
nlohmann::json native_chunk(const ResponseHead& h, const std::vector<TokenPiece>& pieces,
                            const Completion& c, const Tokenizer& tok, StreamCursor& cursor);
// The whole reply (streamed: the last event, its content already sent).
nlohmann::json native_final(const ResponseHead& h, const Completion& c, const Tokenizer& tok,
                            bool streamed);

}  // namespace specula
