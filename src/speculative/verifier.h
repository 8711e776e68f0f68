// verify(): the accept/reject decision of speculative decoding, as a pure function (vLLM's
// rejection sampler). It reads the draft and the target's logits for it and returns how many
// draft tokens are accepted plus one token of the target's own; it runs no model and touches no
// cache (the generation loop, speculative/generator.h, evaluates the target and rolls it back).
//
// The target evaluated [last, d_1..d_N] in one pass: rows[i] is its prediction for the token
// after batch position i, so rows[i] checks d_{i+1} and rows[N] follows a fully accepted draft.
//  - greedy (temp <= 0): accept d_i while d_i == argmax(rows[i-1]); then the target's own argmax:
//    the recovered token at the first mismatch, or the bonus token after a fully accepted draft.
//    The output is token for token the target's greedy output.
//  - sampling: accept d_i with probability min(1, p(d_i) / q(d_i)); on the first rejection the
//    recovered token is drawn from normalise(max(0, p - q)); after a fully accepted draft the
//    bonus token is drawn from p. p and q are Sampler::distribution() of the target and the draft
//    (same transforms), so every emitted token is distributed exactly as plain sampling from the
//    target. The sampler's generator supplies every draw.
//  - verify_synthetic (benchmarks only, NOT exact): accept each d_i with probability A drawn from
//    its own generator, otherwise recover with a sample from the target and stop.
#pragma once

#include <random>
#include <span>
#include <vector>

#include "sampling/sampler.h"
#include "speculative/drafters/drafter.h"

namespace specula {

// The target's logits over one verification pass: rows[i] holds n_vocab logits.
struct LogitRows {
    std::span<const float* const> rows;
    int n_vocab = 0;
    const float* operator[](int i) const { return rows[size_t(i)]; }
};

struct Verdict {
    int n_accepted = 0;   // draft tokens accepted (a prefix of the draft)
    token_id token = -1;  // the recovered token (a draft token was rejected) or the bonus token
    bool bonus = false;   // true: every draft token was accepted and `token` is the bonus token
};

// Reusable buffers of verify(), sized for a vocabulary once, so that verifying allocates nothing.
struct VerifyScratch {
    explicit VerifyScratch(int n_vocab);
    std::vector<TokenProb> p;      // target distribution at the current position
    std::vector<TokenProb> resid;  // max(0, p - q), unnormalised
    std::vector<float> dense;      // indexed by token id, all zero between uses
};

// rows must hold draft.size() + 1 rows.
Verdict verify(const Draft& draft, const LogitRows& rows, Sampler& sampler, VerifyScratch& scratch);

// accept in [0, 1]: the probability of accepting each draft token.
Verdict verify_synthetic(const Draft& draft, const LogitRows& rows, Sampler& sampler, double accept,
                         std::mt19937_64& rng);

}  // namespace specula
