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
//  - Target cost: the engine's one pass-cost model (speculative/draft_length/pass_cost.h), given
//    to every choice; the controller itself learns acceptance, the draft step's cost and the
//    overhead.
//  - Exploration: every explore_every-th step tries a neighbour of the best length, and one time
//    in three the least measured plausible length, so that the costs stay measured.
//  - N = 0 is a choice like any other (E = 1, T = t_target(1)): when drafting loses, steps decode
//    plainly, and exploration still tries N = 1 now and then, so drafting comes back when the
//    text turns predictable.
#pragma once

#include <vector>

#include "speculative/draft_length/pass_cost.h"
#include "speculative/draft_length/step_record.h"

namespace specula {

struct DraftLengthParams {
    int n_min = 0;  // 0: a step may skip drafting (plain decoding) when drafting loses
    int n_max = 16;
    double decay = 0.995;          // weight kept by old acceptance observations at each new one
    double prior_accept = 0.6;     // pooled acceptance before any observation ...
    double prior_weight = 2.0;     // ... worth this many observations
    double position_weight = 4.0;  // pull of the pooled acceptance on each position
    int explore_every = 16;        // every k-th step explores (see above); 0: never
};

class DraftLengthController {
  public:
    explicit DraftLengthController(const DraftLengthParams& params = {});

    // N for the next step, in [n_min, n_max], with target passes costing `cost`.
    int choose(const PassCost& cost) const;
    int best(const PassCost& cost) const;  // the N with the highest expected rate (no exploring)

    // Learns from one step of the generation loop: its acceptance, draft and overhead costs (the
    // target pass's cost goes to the engine's PassCost).
    void observe(const StepRecord& step);

    void observe_accept(int n_drafted, int n_accepted);
    void observe_draft(int steps, double ms);
    void observe_overhead(double ms);

    double pooled_accept() const;
    double accept_estimate(int pos) const;  // a_pos, pos >= 1
    double expected_tokens(int n) const;    // E(N)
    double draft_cost() const { return draft_ms_; }
    double expected_time(int n, const PassCost& cost) const;  // T(N) in ms
    const DraftLengthParams& params() const { return params_; }

  private:
    int least_measured(const PassCost& cost) const;
    double rate(int n, const PassCost& cost) const {
        return expected_tokens(n) / expected_time(n, cost);
    }

    DraftLengthParams params_;
    std::vector<double> reached_, accepted_;  // decayed counts per position
    long n_steps_ = 0;
    double draft_ms_ = 0, draft_n_ = 0, overhead_ms_ = 0, overhead_n_ = 0;
};

}  // namespace specula
