// DraftLengthController: see draft_length.h.
#include "speculative/draft_length/draft_length.h"

#include <algorithm>

#include "common/error.h"

namespace specula {

DraftLengthController::DraftLengthController(const DraftLengthParams& params) : params_(params) {
    if (params.n_min < 0 || params.n_max < std::max(params.n_min, 1))
        fail("draft length: need 0 <= n_min <= n_max and n_max >= 1, got n_min=", params.n_min,
             " n_max=", params.n_max);
    reached_.assign(size_t(params.n_max), 0.0);
    accepted_.assign(size_t(params.n_max), 0.0);
}

void DraftLengthController::observe(const StepRecord& step) {
    observe_draft(step.n_draft_steps, step.draft_ms);
    observe_overhead(step.sample_ms);
    observe_accept(step.n_drafted, step.n_accepted);
}

void DraftLengthController::observe_accept(int n_drafted, int n_accepted) {
    ++n_steps_;  // plain steps count too: exploration must go on while nothing is drafted
    if (n_drafted <= 0) return;
    for (size_t i = 0; i < reached_.size(); ++i) {
        reached_[i] *= params_.decay;
        accepted_[i] *= params_.decay;
    }
    const int checked = std::min({n_drafted, n_accepted + 1, params_.n_max});
    for (int i = 0; i < checked; ++i) reached_[i] += 1.0;
    for (int i = 0; i < std::min(n_accepted, params_.n_max); ++i) accepted_[i] += 1.0;
}

double DraftLengthController::pooled_accept() const {
    double r = 0, a = 0;
    for (size_t i = 0; i < reached_.size(); ++i) r += reached_[i], a += accepted_[i];
    return (a + params_.prior_weight * params_.prior_accept) / (r + params_.prior_weight);
}

double DraftLengthController::accept_estimate(int pos) const {
    const double pooled = pooled_accept();
    if (pos < 1 || pos > params_.n_max) return pooled;
    const size_t i = size_t(pos - 1);
    return (accepted_[i] + params_.position_weight * pooled) /
           (reached_[i] + params_.position_weight);
}

double DraftLengthController::expected_tokens(int n) const {
    double e = 1.0, run = 1.0;
    for (int i = 1; i <= n; ++i) e += run *= accept_estimate(i);
    return e;
}

void DraftLengthController::observe_draft(int steps, double ms) {
    if (steps <= 0) return;
    draft_ms_ = (draft_ms_ * draft_n_ * params_.decay + ms) / (draft_n_ * params_.decay + steps);
    draft_n_ = draft_n_ * params_.decay + steps;
}

void DraftLengthController::observe_overhead(double ms) {
    overhead_ms_ =
        (overhead_ms_ * overhead_n_ * params_.decay + ms) / (overhead_n_ * params_.decay + 1);
    overhead_n_ = overhead_n_ * params_.decay + 1;
}

double DraftLengthController::expected_time(int n, const PassCost& cost) const {
    return n * draft_ms_ + cost.cost(n + 1) + overhead_ms_;
}

int DraftLengthController::choose(const PassCost& cost) const {
    const int n = best(cost);
    const int every = params_.explore_every;
    if (every <= 0 || !cost.measured() || n_steps_ % every != every - 1) return n;
    const long k = n_steps_ / every;
    if (k % 3 == 2) return least_measured(cost);
    return std::clamp(n + (k % 3 ? 1 : -1), params_.n_min, params_.n_max);
}

// Among plausible lengths (up to twice the best, predicted to reach at least half its rate), the
// one whose target batch has the fewest recent measurements.
int DraftLengthController::least_measured(const PassCost& cost) const {
    const int n_best = best(cost);
    const double floor_rate = 0.5 * rate(n_best, cost);
    int pick = n_best;
    for (int n = params_.n_min; n <= std::min(params_.n_max, 2 * n_best); ++n) {
        if (rate(n, cost) < floor_rate) continue;
        if (cost.samples(n + 1) < cost.samples(pick + 1)) pick = n;
    }
    return pick;
}

int DraftLengthController::best(const PassCost& cost) const {
    // Before any timing the costs are unknown: use the middle of the range as a start.
    if (!cost.measured()) return std::clamp(4, params_.n_min, params_.n_max);
    int best = params_.n_min;
    double best_rate = -1.0;
    for (int n = params_.n_min; n <= params_.n_max; ++n) {
        const double r = rate(n, cost);
        if (r > best_rate) best_rate = r, best = n;
    }
    return best;
}

}  // namespace specula
