// Token sampling: greedy, or temperature with top-n-sigma / top-k / typical / top-p / min-p / XTC,
// seeded and reproducible. The transforms run in llama.cpp's order (top-n-sigma, top-k, typical,
// top-p, min-p, XTC, temperature); each is a deterministic function of the logit row (XTC's coin
// becomes a mixture of its two outcomes), so distribution() exposes the final probabilities and
// speculative verification uses the exact same p and q.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace specula {

struct SamplingParams {
    float temp = 0.8f;            // <= 0: greedy
    int top_k = 40;               // <= 0: off
    float top_p = 0.95f;          // >= 1: off
    float min_p = 0.05f;          // <= 0: off
    uint64_t seed = 0xFFFFFFFFu;  // 0xFFFFFFFF (llama.cpp's LLAMA_DEFAULT_SEED): random seed
    // Locally typical sampling (Meister et al.): keeps the tokens whose surprisal -log p is
    // closest to the entropy of the top-k survivors, the fewest whose mass exceeds typical_p
    // (at least one). >= 1: off.
    float typical_p = 1.0f;
    // Top-n-sigma (Tang et al.): keeps the tokens whose logit is within top_n_sigma standard
    // deviations of the largest, the deviation taken over the whole row (tokens banned by a logit
    // bias or a grammar mask left out); fewer than 4 such tokens: off. <= 0: off.
    float top_n_sigma = -1.0f;
    // XTC ("exclude top choices", llama.cpp's xtc): with probability xtc_probability, the
    // candidates left after min-p whose probability (before temperature) is at least
    // xtc_threshold are all removed but the least likely of them, when there are two or more.
    // distribution() gives the mixture of both outcomes, so a draw is distributed as
    // llama.cpp's coin-then-draw and speculative sampling stays exact. 0: off; a threshold over
    // 0.5 can never remove anything (off). Greedy decoding (temp <= 0) takes the best token, as
    // ik_llama.cpp's greedy path does.
    float xtc_probability = 0.0f;
    float xtc_threshold = 0.1f;
};

struct TokenProb {
    int32_t id;
    float p;
};

// Index of the largest logit; ties go to the lowest id.
int32_t argmax(const float* logits, int n_vocab);

class Sampler {
  public:
    explicit Sampler(const SamplingParams& params);

    bool greedy() const { return params_.temp <= 0.f; }
    const SamplingParams& params() const { return params_; }
    uint64_t seed() const { return seed_; }

    // The candidates that survive the transforms and their normalised probabilities, sorted by
    // probability (descending, ties by lower id). Greedy gives the argmax with p = 1. Tokens
    // whose logit is -inf (banned by a logit bias or a grammar mask) are never candidates.
    void distribution(const float* logits, int n_vocab, std::vector<TokenProb>& out) const;

    // Draws one token from distribution(); greedy returns argmax without touching the RNG.
    int32_t sample(const float* logits, int n_vocab);

    // Uniform [0, 1) from this sampler's generator (used by rejection sampling).
    double uniform();
    std::mt19937_64& rng() { return rng_; }

  private:
    SamplingParams params_;
    uint64_t seed_;
    std::mt19937_64 rng_;
    std::vector<TokenProb> scratch_;
};

}  // namespace specula
