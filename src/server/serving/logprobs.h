// Logprobs of generated (and echoed prompt) tokens, as OpenAI's API reports them: the natural log
// of the token's probability under the target's distribution at that position, i.e. the
// log-softmax of the logit row it was chosen from after the request's Constraints (logit bias,
// penalties, grammar mask) and before temperature / top-k / top-p / min-p. The Generator hands
// that row out (speculative/generator.h: RowObserver) and it is bit-identical with and without
// speculation, so the logprobs are too. A token the constraints ban reports -9999 (JSON has no
// -inf), as OpenAI does for negligible probabilities.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specula {

struct TopLogprob {
    int32_t id = -1;
    float logprob = 0;
    int rank = 0;  // as TokenLogprob's
};

struct TokenLogprob {
    int32_t id = -1;
    float logprob = 0;
    int rank =
        0;  // 1 + the tokens more likely than it (vLLM's rank; ties share it); 0: not counted
    std::vector<TopLogprob> top;  // the n_top most likely tokens, most likely first
};

// From one logit row of n_vocab values; with_rank also counts the token's rank (one more pass
// over the row: prompt_logprobs report it, generated tokens' logprobs do not).
TokenLogprob token_logprob(const float* row, int n_vocab, int32_t id, int n_top,
                           bool with_rank = false);

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...], "refusal": null}.
nlohmann::json chat_logprobs_json(const std::vector<TokenLogprob>& tokens, const Tokenizer& tok);

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. `prompt` (echo) comes
// first; its first token has no logprob (null). text_offset counts bytes from `offset0`.
nlohmann::json completion_logprobs_json(const std::vector<TokenLogprob>& prompt,
                                        const std::vector<TokenLogprob>& tokens,
                                        const Tokenizer& tok, size_t offset0 = 0);

// vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank", "decoded_token"}, ...}, ...], one
// entry per prompt token (the first has no logprob), each the token itself, then up to n_top
// alternatives (the most likely first) other than it.
nlohmann::json prompt_logprobs_json(const std::vector<TokenLogprob>& prompt, int n_top,
                                    const Tokenizer& tok);

// The same logprobs with at most n_top alternatives each.
std::vector<TokenLogprob> with_top(std::vector<TokenLogprob> tokens, int n_top);

}  // namespace specula
