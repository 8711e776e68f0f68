// Draft length by load (the engine's step for sequences under `serve --draft auto`): as more slots
// share a pass, the pass grows from memory-bound (extra rows nearly free) to compute-bound (each
// row costs), and long drafts stop paying. Every step the scheduler picks ONE draft length k for
// the slots that adapt, maximising
//
//   sum_i E_i(k) / (t_pass(rows_other + n_auto * (1 + k)) + k * n_auto * t_draft)
//
// where E_i(k) is slot i's expected tokens per pass from its acceptance estimates
// (DraftLengthController::expected_tokens), t_pass(r) the engine's pass-cost model
// (speculative/draft_length/pass_cost.h) and t_draft the measured cost of one draft step.
//  - Every explore_every-th choice tries a neighbour of the best k, so that costs around it stay
//    measured.
#pragma once

#include <vector>

#include "speculative/draft_length/draft_length.h"
#include "speculative/draft_length/pass_cost.h"

namespace specula {

struct LoadDraftParams {
    int n_max = 8;
    int explore_every = 16;
};

class LoadDraftLength {
  public:
    explicit LoadDraftLength(const LoadDraftParams& p = {}) : p_(p) {}

    // k for this step: `slots` are the adapting slots' controllers, rows_other the pass's other
    // rows (slots with a fixed length, prompt chunks), draft_ms one draft step's cost, `cost` the
    // engine's pass costs.
    int choose(const std::vector<const DraftLengthController*>& slots, int rows_other,
               double draft_ms, const PassCost& cost);
    int best(const std::vector<const DraftLengthController*>& slots, int rows_other,
             double draft_ms, const PassCost& cost) const;
    int last() const { return last_; }

  private:
    LoadDraftParams p_;
    long n_choices_ = 0;
    int last_ = -1;
};

}  // namespace specula
