// DraftChooser: the token a model drafter (a draft model, an MTP head) proposes from one row of
// its logits, the one place that choice is made. The row is masked by the target's constraints
// first (the guide: sampling/constraints.h); then the argmax when the target decodes greedily,
// else a draw from the drafter's own sampler (the target's parameters, a seed derived from the
// target's, so the draws are independent of the target's acceptance draws), its distribution q
// kept in the Draft for rejection sampling. p_min (--draft-p-min) declines a row whose most
// likely token is less likely than that (softmax of the raw row when greedy, q when sampling).
#pragma once

#include <cstdint>
#include <vector>

#include "sampling/constraints.h"
#include "sampling/sampler.h"
#include "speculative/drafters/drafter.h"

namespace specula {

class DraftChooser {
  public:
    // The drafter's seed is (seed * mul) ^ xor_ of the target's (a random seed stays random).
    DraftChooser(const SamplingParams& target, uint64_t mul, uint64_t xor_);

    bool greedy() const { return sampler_.greedy(); }
    // The token for the next draft position from `logits` (n_vocab of them), its q appended to
    // `out` when sampling; -1 when nothing is to be drafted: an empty distribution, a row below
    // p_min, or a token the guide refuses (every token banned).
    token_id choose(const float* logits, int n_vocab, Draft& out, Constraints* guide,
                    float p_min = 0.0f);

  private:
    Sampler sampler_;
    std::vector<float> guided_;  // a row after the guide's constraints
};

}  // namespace specula
