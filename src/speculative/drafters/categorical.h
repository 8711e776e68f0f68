// Small probability helpers shared by drafters and the verifier: draws from a sparse
// distribution and looks up one token's probability. No allocation.
#pragma once

#include <span>

#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace specula {

// Token drawn from `dist` (probabilities summing to ~1) with a uniform u in [0, 1). Rounding
// leftovers go to the last candidate. `dist` must not be empty.
inline token_id sample_categorical(std::span<const TokenProb> dist, double u) {
    double acc = 0.0;
    for (const TokenProb& c : dist) {
        acc += c.p;
        if (u < acc) return c.id;
    }
    return dist.back().id;
}

// Probability of `id` in `dist` (0 when absent).
inline float prob_of(std::span<const TokenProb> dist, token_id id) {
    for (const TokenProb& c : dist)
        if (c.id == id) return c.p;
    return 0.f;
}

}  // namespace specula
