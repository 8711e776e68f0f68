// DraftLengthController: see draft_length.h.
#include "speculative/draft_length.h"

#include <algorithm>

#include "common/error.h"

namespace specula {

double DraftLengthController::CostWindow::median() const {
    std::array<double, kWindow> v = ms;
    std::sort(v.begin(), v.begin() + n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

DraftLengthController::DraftLengthController(const DraftLengthParams& params) : params_(params) {
    if (params.n_min < 0 || params.n_max < std::max(params.n_min, 1))
        fail("draft length: need 0 <= n_min <= n_max and n_max >= 1, got n_min=", params.n_min,
             " n_max=", params.n_max);
    reached_.assign(size_t(params.n_max), 0.0);
    accepted_.assign(size_t(params.n_max), 0.0);
    cost_.assign(size_t(params.n_max) + 2, CostWindow{});
}

void DraftLengthController::observe(const StepRecord& step) {
    observe_draft(step.n_draft_steps, step.draft_ms);
    observe_target(step.n_drafted + 1, step.verify_ms);
    observe_overhead(step.sample_ms);
    observe_accept(step.n_drafted, step.n_accepted);
}

void DraftLengthController::observe_accept(int n_drafted, int n_accepted) {
    if (n_drafted <= 0) return;
    ++n_steps_;
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

void DraftLengthController::observe_target(int batch, double ms) {
    if (batch < 1) return;
    CostWindow& w = cost_[std::min<size_t>(size_t(batch), cost_.size() - 1)];
    w.ms[size_t(w.head)] = ms;
    w.head = (w.head + 1) % kWindow;
    w.n = std::min(w.n + 1, kWindow);
    fit_target();
}

// Weighted least squares of the per-size medians; with a single size measured, the slope is the
// prior fraction of the intercept.
void DraftLengthController::fit_target() {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    int sizes = 0;
    for (size_t b = 1; b < cost_.size(); ++b) {
        if (cost_[b].n == 0) continue;
        const double w = cost_[b].n, x = double(b) - 1.0, y = cost_[b].median();
        sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
        ++sizes;
    }
    if (sizes == 0) return;
    const double den = sw * sxx - sx * sx;
    if (sizes >= 2 && den > 1e-12) {
        t1_ = std::max(0.0, (sw * sxy - sx * sy) / den);
        t0_ = std::max(1e-9, (sy - t1_ * sx) / sw);
    } else {
        const double mx = sx / sw, my = sy / sw;
        t0_ = my / (1.0 + params_.prior_slope * mx);
        t1_ = params_.prior_slope * t0_;
    }
}

double DraftLengthController::target_cost(int batch) const {
    const size_t b = size_t(std::max(batch, 1));
    if (b < cost_.size() && cost_[b].n > 0) return cost_[b].median();
    return t0_ + t1_ * (batch - 1);
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

double DraftLengthController::expected_time(int n) const {
    return n * draft_ms_ + target_cost(n + 1) + overhead_ms_;
}

int DraftLengthController::choose() const {
    const int n = best();
    const int every = params_.explore_every;
    if (every <= 0 || t0_ <= 0.0 || n_steps_ % every != every - 1) return n;
    const long k = n_steps_ / every;
    if (k % 3 == 2) return least_measured();
    return std::clamp(n + (k % 3 ? 1 : -1), params_.n_min, params_.n_max);
}

// Among plausible lengths (up to twice the best, predicted to reach at least half its rate), the
// one whose target batch has the fewest recent measurements.
int DraftLengthController::least_measured() const {
    const int n_best = best();
    const double floor_rate = 0.5 * rate(n_best);
    int pick = n_best;
    for (int n = params_.n_min; n <= std::min(params_.n_max, 2 * n_best); ++n) {
        if (rate(n) < floor_rate) continue;
        if (cost_[size_t(n) + 1].n < cost_[size_t(pick) + 1].n) pick = n;
    }
    return pick;
}

int DraftLengthController::best() const {
    // Before any timing the costs are unknown: use the middle of the range as a start.
    if (t0_ <= 0.0) return std::clamp(4, params_.n_min, params_.n_max);
    int best = params_.n_min;
    double best_rate = -1.0;
    for (int n = params_.n_min; n <= params_.n_max; ++n) {
        const double r = rate(n);
        if (r > best_rate) best_rate = r, best = n;
    }
    return best;
}

}  // namespace specula
