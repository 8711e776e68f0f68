// Adaptive draft length (`--draft auto`): before each step, pick the draft length N that
// maximises the expected number of tokens per second,
//
//   E(N) = 1 + sum_{k=1..N} prod_{i=1..k} a_i          (tokens produced by one target pass)
//   T(N) = N * t_draft + t_target(N + 1) + t_overhead   (time of the step)
//
// where a_i is the running estimate of the conditional acceptance at draft position i (given
// 1..i-1 accepted), t_draft the measured cost of one draft step and t_target(b) the cost of a
// target pass over b tokens.
//  - Acceptance: exponentially decayed counts per position, each shrunk toward the pooled
//    acceptance of all positions, so a position seen a few times (or never) takes the pooled
//    value instead of a noisy or missing one.
//  - Target cost: the median of the last few passes of that batch size (robust to the slow
//    outliers of a busy machine), or for sizes not measured yet a least-squares line through the
//    measured medians. Real cost curves are not lines (a pass over 2 tokens often costs what 1
//    does), so measured sizes always use their own numbers.
//  - Exploration: every explore_every-th step tries a neighbour of the best length, and one time
//    in three the least measured plausible length, so that the costs stay measured.
#pragma once

#include <array>
#include <vector>

#include "speculative/step_record.h"

namespace specula {

struct DraftLengthParams {
    int n_min = 1;
    int n_max = 16;
    double decay = 0.995;          // weight kept by old acceptance observations at each new one
    double prior_accept = 0.6;     // pooled acceptance before any observation ...
    double prior_weight = 2.0;     // ... worth this many observations
    double position_weight = 4.0;  // pull of the pooled acceptance on each position
    double prior_slope = 0.05;     // t_target(b) slope / t_target(1) until two sizes are measured
    int explore_every = 16;        // every k-th step explores (see above); 0: never
};

class DraftLengthController {
  public:
    explicit DraftLengthController(const DraftLengthParams& params = {});

    int choose() const;  // N for the next step, in [n_min, n_max]
    int best() const;    // the N with the highest expected rate (no exploration)

    // Learns from one step of the generation loop: its acceptance and its costs.
    void observe(const StepRecord& step);

    void observe_accept(int n_drafted, int n_accepted);
    void observe_target(int batch, double ms);
    void observe_draft(int steps, double ms);
    void observe_overhead(double ms);

    double pooled_accept() const;
    double accept_estimate(int pos) const;  // a_pos, pos >= 1
    double expected_tokens(int n) const;    // E(N)
    double target_cost(int batch) const;    // t_target(b) in ms (0 before any measurement)
    double draft_cost() const { return draft_ms_; }
    double expected_time(int n) const;  // T(N) in ms
    const DraftLengthParams& params() const { return params_; }

  private:
    static constexpr int kWindow = 8;  // passes kept per batch size
    struct CostWindow {
        std::array<double, kWindow> ms{};
        int n = 0, head = 0;
        double median() const;
    };

    void fit_target();
    int least_measured() const;
    double rate(int n) const { return expected_tokens(n) / expected_time(n); }

    DraftLengthParams params_;
    std::vector<double> reached_, accepted_;  // decayed counts per position
    std::vector<CostWindow> cost_;            // per batch size 1..n_max+1
    double t0_ = 0, t1_ = 0;                  // fitted line t0 + t1 * (b - 1)
    long n_steps_ = 0;
    double draft_ms_ = 0, draft_n_ = 0, overhead_ms_ = 0, overhead_n_ = 0;
};

}  // namespace specula
