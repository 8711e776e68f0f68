// What `run` and `serve` do alike to a request before generating: the prompt's tokens, the check
// that the prompt and its token budget fit the context, and the default thread count.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specula {

// Prompt tokens as llama-cli makes them (BOS as the vocabulary says, special tokens parsed). An
// empty result (a vocabulary that adds no BOS and an empty prompt) starts from BOS alone, so
// there is always something to evaluate; Error when the vocabulary has no BOS either.
std::vector<token_id> tokenize_prompt(const Tokenizer& tok, const std::string& text);

// Whether n_prompt tokens plus a budget of n_predict more (-1: no budget) fit n_ctx positions.
// message (when they do not) names the context as "the context" + ctx_label and the budget as
// budget_name, e.g. " (-c)" and "-n" for `run`, "" and "max_tokens" for the server.
struct ContextFit {
    enum What { fits, prompt_too_long, budget_too_long } what = fits;
    std::string message;
};
ContextFit check_context(int n_prompt, int n_predict, int n_ctx, const std::string& ctx_label,
                         const std::string& budget_name);

// `requested` when > 0, else every hardware thread (at least 1).
int default_threads(int requested);

}  // namespace specula
