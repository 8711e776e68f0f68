// tokenize_prompt / min_prompt_tokens / check_context / check_prompt_bytes:
// see prompt.h.
#include "tokenizer/prompt.h"

#include <algorithm>
#include <cstdint>

#include "common/error.h"

namespace specula {

std::vector<token_id> tokenize_prompt(const Tokenizer& tok, const std::string& text) {
    return tokenize_prompt(tok, text, {});
}

std::vector<token_id> tokenize_prompt(const Tokenizer& tok, const std::string& text,
                                      std::span<const TextSpan> plain) {
    auto ids = plain.empty() ? tok.encode(text, /*add_special=*/true, /*parse_special=*/true)
                             : tok.encode(text, /*add_special=*/true, plain);
    if (ids.empty()) {
        if (tok.bos() < 0) fail("the prompt is empty and the vocabulary has no BOS token");
        ids.push_back(tok.bos());
    }
    return ids;
}

ContextFit check_context(int n_prompt, int n_predict, int n_ctx, const std::string& ctx_label,
                         const std::string& budget_name) {
    const std::string ctx = "the context" + ctx_label;
    if (n_prompt > n_ctx)
        return {ContextFit::prompt_too_long, "the prompt is " + std::to_string(n_prompt) +
                                                 " tokens but " + ctx + " holds " +
                                                 std::to_string(n_ctx)};
    if (n_predict >= 0 && int64_t(n_prompt) + n_predict > n_ctx)  // no int overflow
        return {ContextFit::budget_too_long, "prompt (" + std::to_string(n_prompt) + " tokens) + " +
                                                 budget_name + " " + std::to_string(n_predict) +
                                                 " exceeds " + ctx + " of " +
                                                 std::to_string(n_ctx) + " tokens"};
    return {};
}

size_t longest_token_bytes(const Tokenizer& tok) {
    size_t longest = 1;
    for (token_id id = 0; id < tok.n_vocab(); ++id)
        longest = std::max(longest, tok.token_text(id).size());
    return longest;
}

int64_t min_prompt_tokens(const Tokenizer& tok, size_t n_bytes) {
    const size_t longest = longest_token_bytes(tok);
    return int64_t(n_bytes / longest + (n_bytes % longest != 0));
}

ContextFit check_prompt_bytes(const Tokenizer& tok, size_t n_bytes, int n_ctx,
                              const std::string& ctx_label) {
    const int64_t n_min = min_prompt_tokens(tok, n_bytes);
    if (n_min <= n_ctx) return {};
    const size_t longest = longest_token_bytes(tok);
    return {ContextFit::prompt_too_long, "the prompt is " + std::to_string(n_bytes) +
                                             " bytes, so at least " + std::to_string(n_min) +
                                             " tokens (no token of the vocabulary is longer than " +
                                             std::to_string(longest) + " bytes), but the context" +
                                             ctx_label + " holds " + std::to_string(n_ctx)};
}

}  // namespace specula
