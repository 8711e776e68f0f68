// Verifier: checks a draft against the target model in one batched pass and decides which draft
// tokens to keep (vLLM's rejection sampler, llama.cpp's naming).
//
// evaluate(): the target evaluates [last, d_1..d_N] in ONE Session::eval; logits(i) is the
// target's prediction for the token after position i.
// decide():
//  - greedy (temp <= 0): keep d_i while d_i == argmax(target logits at i-1); then append the
//    target's own argmax (the correction, or the bonus token after a fully accepted draft). The
//    output is token-for-token the target's greedy output.
//  - sampling: keep d_i with probability min(1, p(d_i) / q(d_i)); on the first rejection draw the
//    replacement from normalise(max(0, p - q)) and stop; after a fully accepted draft draw a bonus
//    token from p. p and q are Sampler::distribution() of the target and the draft (same
//    transforms), so every emitted token is distributed exactly as plain sampling from the target.
//  - synthetic acceptance A (benchmarks only, NOT exact): keep each d_i with probability A,
//    otherwise take the target's own token and stop.
// Afterwards the target's KV cache is rolled back past the rejected draft tokens: it holds the
// history up to and including `last` plus the kept draft tokens; the returned `next` token is not
// evaluated yet (it is the next step's `last`).
#pragma once

#include <random>
#include <vector>

#include "model/model.h"
#include "sampling/sampler.h"
#include "speculative/drafter.h"

namespace specula {

struct VerifyResult {
    int n_accepted = 0;  // draft tokens kept (a prefix of the draft)
    token_id next = -1;  // the target's token after them
};

class Verifier {
  public:
    // synthetic_accept < 0: exact verification; in [0, 1]: synthetic acceptance (bench only).
    explicit Verifier(int n_vocab, double synthetic_accept = -1.0, uint64_t synthetic_seed = 1234);

    void evaluate(Session& target, token_id last, const Draft& draft);
    VerifyResult decide(Session& target, const Draft& draft, Sampler& sampler);

    bool synthetic() const { return synthetic_accept_ >= 0.0; }

  private:
    int decide_greedy(const Session& target, const Draft& draft, token_id& next);
    int decide_sampling(const Session& target, const Draft& draft, Sampler& sampler,
                        token_id& next);
    int decide_synthetic(const Session& target, const Draft& draft, Sampler& sampler,
                         token_id& next);
    token_id sample_residual(const Draft& draft, int i, Sampler& sampler);

    int n_vocab_;
    double synthetic_accept_;
    std::mt19937_64 synthetic_rng_;
    int n_past_before_ = 0;
    std::vector<token_id> batch_;
    std::vector<TokenProb> p_;      // target distribution at the current position
    std::vector<TokenProb> resid_;  // max(0, p - q), unnormalised
    std::vector<float> dense_;      // scratch indexed by token id, all zero between uses
};

}  // namespace specula
