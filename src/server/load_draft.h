// Draft length by load (`serve --draft auto`): as more slots share a pass, the pass grows from
// memory-bound (extra rows nearly free) to compute-bound (each row costs), and long drafts stop
// paying. Every step the scheduler picks ONE draft length k for the slots that adapt, maximising
//
//   sum_i E_i(k) / (t_pass(rows_other + n_auto * (1 + k)) + k * n_auto * t_draft)
//
// where E_i(k) is slot i's expected tokens per pass from its acceptance estimates
// (DraftLengthController::expected_tokens), t_pass(r) the measured cost of a pass over r rows and
// t_draft the measured cost of one draft step.
//  - PassCost: the median of the last few passes of each row count; counts not measured yet are
//    interpolated between the nearest measured ones (extrapolated from the last two), a single
//    measurement is scaled by a prior slope.
//  - Every explore_every-th choice tries a neighbour of the best k, so that costs around it stay
//    measured.
#pragma once

#include <array>
#include <vector>

#include "speculative/draft_length.h"

namespace specula {

class PassCost {
  public:
    explicit PassCost(int max_rows = 1024, double prior_slope = 0.02);
    void observe(int rows, double ms);
    double cost(int rows) const;  // ms; 0 before any measurement
    bool measured() const { return n_measured_ > 0; }

  private:
    static constexpr int kWindow = 8;
    struct Window {
        std::array<double, kWindow> ms{};
        int n = 0, head = 0;
        double median() const;
    };
    std::vector<Window> w_;  // by row count
    double prior_slope_;
    int n_measured_ = 0;
};

struct LoadDraftParams {
    int n_max = 8;
    int explore_every = 16;
    double prior_slope = 0.02;  // cost of one more row / cost of the measured count, until two
};

class LoadDraftLength {
  public:
    explicit LoadDraftLength(const LoadDraftParams& p = {}) : p_(p), cost_(1024, p.prior_slope) {}

    // k for this step: `slots` are the adapting slots' controllers, rows_other the pass's other
    // rows (slots with a fixed length, prompt chunks), draft_ms one draft step's cost.
    int choose(const std::vector<const DraftLengthController*>& slots, int rows_other,
               double draft_ms);
    int best(const std::vector<const DraftLengthController*>& slots, int rows_other,
             double draft_ms) const;
    void observe_pass(int rows, double ms) { cost_.observe(rows, ms); }
    const PassCost& cost() const { return cost_; }
    int last() const { return last_; }

  private:
    LoadDraftParams p_;
    PassCost cost_;
    long n_choices_ = 0;
    int last_ = -1;
};

}  // namespace specula
