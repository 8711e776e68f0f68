// What `run` and `serve` do alike to a request before generating: the prompt's tokens, the check
// that the prompt and its token budget fit the context, and the default thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specula {

// Prompt tokens as llama-cli makes them (BOS as the vocabulary says, special tokens parsed). An
// empty result (a vocabulary that adds no BOS and an empty prompt) starts from BOS alone, so
// there is always something to evaluate; Error when the vocabulary has no BOS either.
std::vector<token_id> tokenize_prompt(const Tokenizer& tok, const std::string& text);
// The same, with no CONTROL / UNKNOWN token matched over the `plain` spans (Tokenizer::encode).
std::vector<token_id> tokenize_prompt(const Tokenizer& tok, const std::string& text,
                                      std::span<const TextSpan> plain);

// The fewest tokens a prompt of n_bytes can give with this vocabulary, known without tokenizing
// it: no token covers more prompt bytes than its text has (SentencePiece writes a space as the
// 3-byte "▁", byte-level BPE one character of 1 or 2 bytes per byte, special tokens match their
// text), so ceil(n_bytes / the longest token text). Tokenizing tens of MB takes seconds; this
// bound lets a prompt that cannot fit the context be refused first. (It assumes no token strips
// the whitespace next to it, llama.cpp's lstrip/rstrip, which Specula's tokenizers do not do.)
int64_t min_prompt_tokens(const Tokenizer& tok, size_t n_bytes);
size_t longest_token_bytes(const Tokenizer& tok);  // that longest text, at least 1

// Whether n_prompt tokens plus a budget of n_predict more (-1: no budget) fit n_ctx positions.
// message (when they do not) names the context as "the context" + ctx_label and the budget as
// budget_name, e.g. " (-c)" and "-n" for `run`, "" and "max_tokens" for the server.
struct ContextFit {
    enum What { fits, prompt_too_long, budget_too_long } what = fits;
    std::string message;
};
ContextFit check_context(int n_prompt, int n_predict, int n_ctx, const std::string& ctx_label,
                         const std::string& budget_name);

// prompt_too_long when a prompt of n_bytes cannot fit n_ctx positions by min_prompt_tokens (the
// message gives its bytes and that bound); fits otherwise, when only tokenizing can tell.
ContextFit check_prompt_bytes(const Tokenizer& tok, size_t n_bytes, int n_ctx,
                              const std::string& ctx_label);

}  // namespace specula
