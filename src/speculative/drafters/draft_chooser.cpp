// DraftChooser: see draft_chooser.h.
#include "speculative/drafters/draft_chooser.h"

#include <algorithm>
#include <cmath>

#include "speculative/drafters/categorical.h"

namespace specula {

namespace {

SamplingParams derived(SamplingParams p, uint64_t mul, uint64_t xor_) {
    const uint64_t random_seed = 0xFFFFFFFFu;
    if (p.seed != random_seed) p.seed = (p.seed * mul) ^ xor_;
    if (p.seed == random_seed) p.seed ^= 1;
    return p;
}

// Largest softmax probability of raw logits.
float top_prob(const float* logits, int n) {
    const float mx = *std::max_element(logits, logits + n);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - mx);
    return float(1.0 / sum);
}

}  // namespace

DraftChooser::DraftChooser(const SamplingParams& target, uint64_t mul, uint64_t xor_)
    : sampler_(derived(target, mul, xor_)) {}

token_id DraftChooser::choose(const float* logits, int n_vocab, Draft& out, Constraints* guide,
                              float p_min) {
    if (guide) logits = guide->apply(logits, guided_);
    token_id tok;
    if (out.has_q) {
        std::vector<TokenProb>& q = out.next_q();
        sampler_.distribution(logits, n_vocab, q);
        if (q.empty() || (p_min > 0.0f && q[0].p < p_min)) return -1;
        tok = sample_categorical(q, sampler_.uniform());
    } else {
        if (p_min > 0.0f && top_prob(logits, n_vocab) < p_min) return -1;
        tok = argmax(logits, n_vocab);
    }
    // Everything banned (a -inf row): nothing to draft.
    if (guide && !guide->accept(tok)) return -1;
    return tok;
}

}  // namespace specula
