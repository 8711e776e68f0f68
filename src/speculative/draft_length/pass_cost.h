// PassCost: THE model of what a target pass over r rows costs, measured once, in the engine
// (speculative/engine.h), and read by everything that trades drafting against verifying: the
// per-sequence draft length (speculative/draft_length/draft_length.h), the draft length by load
// (speculative/draft_length/load_draft.h), the draft source by cost
// (speculative/draft_length/draft_source.h) and the statistics' plain-decoding estimate
// (speculative/stats.h).
//
//  - A row count that was measured costs the median of its last kWindow passes (robust to the
//    slow outliers of a busy machine).
//  - A count between two measured ones is interpolated between them; one beyond them is
//    extrapolated from the nearest two (never below half the nearest); with a single count
//    measured, a prior slope (a fraction of that cost per row) stands in for the missing one.
//    Real cost curves are not lines (a pass over 2 rows often costs what 1 does), so measured
//    counts always use their own numbers.
#pragma once

#include <array>
#include <vector>

namespace specula {

// The median of the last kWindow values observed.
class RollingMedian {
  public:
    static constexpr int kWindow = 8;
    void add(double v);
    double median() const;  // 0 when empty
    int size() const { return n_; }

  private:
    std::array<double, kWindow> v_{};
    int n_ = 0, head_ = 0;
};

class PassCost {
  public:
    explicit PassCost(int max_rows = 1024, double prior_slope = 0.02);

    void observe(int rows, double ms);
    double cost(int rows) const;  // ms; 0 before any measurement
    bool measured() const { return n_measured_ > 0; }
    int samples(int rows) const;  // passes of this row count in the window (0: not measured)
    int max_rows() const { return int(w_.size()) - 1; }

  private:
    std::vector<RollingMedian> w_;  // by row count
    double prior_slope_;
    int n_measured_ = 0;
};

}  // namespace specula
