// PassCost: see pass_cost.h.
#include "speculative/draft_length/pass_cost.h"

#include <algorithm>
#include <utility>

namespace specula {

void RollingMedian::add(double v) {
    v_[size_t(head_)] = v;
    head_ = (head_ + 1) % kWindow;
    n_ = std::min(n_ + 1, kWindow);
}

double RollingMedian::median() const {
    if (n_ == 0) return 0;
    // An insertion sort of at most kWindow values (std::sort's inlined 16-element threshold makes
    // GCC 12 warn about bounds this array never reaches).
    std::array<double, kWindow> s = v_;
    for (int i = 1; i < n_; ++i)
        for (int j = i; j > 0 && s[size_t(j)] < s[size_t(j - 1)]; --j)
            std::swap(s[size_t(j)], s[size_t(j - 1)]);
    return n_ % 2 ? s[size_t(n_ / 2)] : 0.5 * (s[size_t(n_ / 2 - 1)] + s[size_t(n_ / 2)]);
}

PassCost::PassCost(int max_rows, double prior_slope)
    : w_(size_t(std::max(max_rows, 1)) + 1), prior_slope_(prior_slope) {}

void PassCost::observe(int rows, double ms) {
    if (rows < 1) return;
    RollingMedian& w = w_[size_t(std::min(rows, max_rows()))];
    if (w.size() == 0) ++n_measured_;
    w.add(ms);
}

int PassCost::samples(int rows) const {
    return rows >= 1 && rows <= max_rows() ? w_[size_t(rows)].size() : 0;
}

double PassCost::cost(int rows) const {
    const int top = max_rows();
    rows = std::clamp(rows, 1, top);
    auto has = [&](int r) { return r >= 1 && r <= top && w_[size_t(r)].size() > 0; };
    auto at = [&](int r) { return w_[size_t(r)].median(); };
    if (has(rows)) return at(rows);
    int lo = rows - 1, hi = rows + 1;
    while (lo >= 1 && !has(lo)) --lo;
    while (hi <= top && !has(hi)) ++hi;
    const bool has_lo = lo >= 1, has_hi = hi <= top;
    if (has_lo && has_hi) return at(lo) + (at(hi) - at(lo)) * double(rows - lo) / double(hi - lo);
    if (!has_lo && !has_hi) return 0;
    const int a = has_lo ? lo : hi;  // the nearest measured count, and the one beyond it
    const int dir = has_lo ? -1 : 1;
    int b = a + dir;
    while (b >= 1 && b <= top && !has(b)) b += dir;
    if (b < 1 || b > top)
        return std::max(at(a) * 0.5, at(a) * (1.0 + prior_slope_ * double(rows - a)));
    const double per_row = (at(a) - at(b)) / double(a - b);
    return std::max(at(a) * 0.5, at(a) + std::max(0.0, per_row) * double(rows - a));
}

}  // namespace specula
