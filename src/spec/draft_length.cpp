// DraftLengthController: see draft_length.h.
#include "spec/draft_length.h"

#include <algorithm>

#include "common/error.h"

namespace specula {

DraftLengthController::DraftLengthController(const DraftLengthParams& params) : params_(params) {
    if (params.n_min < 0 || params.n_max < std::max(params.n_min, 1))
        fail("draft length: need 0 <= n_min <= n_max and n_max >= 1, got n_min=", params.n_min,
             " n_max=", params.n_max);
    reached_.assign(size_t(params.n_max), 0.0);
    accepted_.assign(size_t(params.n_max), 0.0);
    batch_ms_.assign(size_t(params.n_max) + 2, 0.0);
    batch_n_.assign(size_t(params.n_max) + 2, 0.0);
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

double DraftLengthController::accept_estimate(int pos) const {
    double prior = params_.prior_accept;
    double a = prior;
    const int last = std::min(pos, params_.n_max);
    for (int i = 0; i < last; ++i) {
        a = (accepted_[i] + params_.prior_weight * prior) / (reached_[i] + params_.prior_weight);
        prior = a;
    }
    return a;
}

double DraftLengthController::expected_tokens(int n) const {
    double e = 1.0, run = 1.0, prior = params_.prior_accept;
    for (int i = 0; i < n; ++i) {
        double a = prior;
        if (i < params_.n_max)
            a = (accepted_[i] + params_.prior_weight * prior) /
                (reached_[i] + params_.prior_weight);
        prior = a;
        run *= a;
        e += run;
    }
    return e;
}

void DraftLengthController::observe_target(int batch, double ms) {
    if (batch < 1) return;
    const size_t b = std::min<size_t>(size_t(batch), batch_ms_.size() - 1);
    for (size_t i = 0; i < batch_ms_.size(); ++i) {
        batch_ms_[i] *= params_.decay;
        batch_n_[i] *= params_.decay;
    }
    batch_ms_[b] += ms;
    batch_n_[b] += 1.0;
    fit_target();
}

// Weighted least squares of the per-size means; with a single size measured, the slope is the
// prior fraction of the intercept.
void DraftLengthController::fit_target() {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    int sizes = 0;
    for (size_t b = 1; b < batch_ms_.size(); ++b) {
        const double w = batch_n_[b];
        if (w < 1e-9) continue;
        const double x = double(b) - 1.0, y = batch_ms_[b] / w;
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
    // Mostly the neighbours of the best length; every third exploration the length whose target
    // batch has been measured least, since real cost curves have steps a line cannot predict.
    const long k = n_steps_ / every;
    if (k % 3 == 2) return least_measured();
    return std::clamp(n + (k % 3 ? 1 : -1), params_.n_min, params_.n_max);
}

// Among plausible lengths (up to twice the best, predicted to reach at least half its rate), the
// one whose target batch has the fewest measurements.
int DraftLengthController::least_measured() const {
    const int n_best = best();
    const double floor_rate = 0.5 * expected_tokens(n_best) / expected_time(n_best);
    int pick = n_best;
    for (int n = params_.n_min; n <= std::min(params_.n_max, 2 * n_best); ++n) {
        if (expected_tokens(n) / expected_time(n) < floor_rate) continue;
        if (batch_n_[size_t(n) + 1] < batch_n_[size_t(pick) + 1]) pick = n;
    }
    return pick;
}

int DraftLengthController::best() const {
    // Before any timing the costs are unknown: use the middle of the range as a start.
    if (t0_ <= 0.0) return std::clamp(4, params_.n_min, params_.n_max);
    int best = params_.n_min;
    double best_rate = -1.0;
    for (int n = params_.n_min; n <= params_.n_max; ++n) {
        const double rate = expected_tokens(n) / expected_time(n);
        if (rate > best_rate) best_rate = rate, best = n;
    }
    return best;
}

}  // namespace specula
