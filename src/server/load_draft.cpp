// LoadDraftLength: see load_draft.h.
#include "server/load_draft.h"

#include <algorithm>
#include <utility>

namespace specula {

PassCost::PassCost(int max_rows, double prior_slope)
    : w_(size_t(max_rows) + 1), prior_slope_(prior_slope) {}

double PassCost::Window::median() const {
    // An insertion sort of at most kWindow values (std::sort's inlined 16-element threshold makes
    // GCC 12 warn about bounds this array never reaches).
    std::array<double, kWindow> s = ms;
    for (int i = 1; i < n; ++i)
        for (int j = i; j > 0 && s[size_t(j)] < s[size_t(j - 1)]; --j)
            std::swap(s[size_t(j)], s[size_t(j - 1)]);
    return n % 2 ? s[size_t(n / 2)] : 0.5 * (s[size_t(n / 2 - 1)] + s[size_t(n / 2)]);
}

void PassCost::observe(int rows, double ms) {
    if (rows < 1) return;
    Window& w = w_[size_t(std::min<int>(rows, int(w_.size()) - 1))];
    if (w.n == 0) ++n_measured_;
    w.ms[size_t(w.head)] = ms;
    w.head = (w.head + 1) % kWindow;
    w.n = std::min(w.n + 1, kWindow);
}

double PassCost::cost(int rows) const {
    rows = std::clamp(rows, 1, int(w_.size()) - 1);
    if (w_[size_t(rows)].n) return w_[size_t(rows)].median();
    int lo = rows - 1, hi = rows + 1;
    while (lo >= 1 && !w_[size_t(lo)].n) --lo;
    while (hi < int(w_.size()) && !w_[size_t(hi)].n) ++hi;
    const bool has_lo = lo >= 1, has_hi = hi < int(w_.size());
    auto at = [&](int r) { return w_[size_t(r)].median(); };
    if (has_lo && has_hi) return at(lo) + (at(hi) - at(lo)) * double(rows - lo) / double(hi - lo);
    if (!has_lo && !has_hi) return 0;
    const int a = has_lo ? lo : hi;  // the nearest measured count, and the one beyond it
    int b = has_lo ? a - 1 : a + 1;
    while (b >= 1 && b < int(w_.size()) && !w_[size_t(b)].n) b += has_lo ? -1 : 1;
    if (b < 1 || b >= int(w_.size())) return at(a) * (1.0 + prior_slope_ * double(rows - a));
    const double per_row = (at(a) - at(b)) / double(a - b);
    return std::max(at(a) * 0.5, at(a) + std::max(0.0, per_row) * double(rows - a));
}

int LoadDraftLength::best(const std::vector<const DraftLengthController*>& slots, int rows_other,
                          double draft_ms) const {
    if (slots.empty() || !cost_.measured()) return -1;
    const int n = int(slots.size());
    int best_k = 0;
    double best_rate = -1;
    for (int k = 0; k <= p_.n_max; ++k) {
        double tokens = 0;
        for (const DraftLengthController* c : slots) tokens += c->expected_tokens(k);
        const double t = cost_.cost(rows_other + n * (1 + k)) + k * n * draft_ms;
        const double rate = t > 0 ? tokens / t : 0;
        if (rate > best_rate) {
            best_rate = rate;
            best_k = k;
        }
    }
    return best_k;
}

int LoadDraftLength::choose(const std::vector<const DraftLengthController*>& slots, int rows_other,
                            double draft_ms) {
    int k = best(slots, rows_other, draft_ms);
    if (k < 0) k = slots.empty() ? 0 : slots.front()->choose();  // nothing measured yet
    if (p_.explore_every > 0 && ++n_choices_ % p_.explore_every == 0) {
        const int dir = (n_choices_ / p_.explore_every) % 2 ? 1 : -1;  // alternately up, down
        k = k + dir >= 0 && k + dir <= p_.n_max ? k + dir : k - dir;
    }
    last_ = std::clamp(k, 0, p_.n_max);
    return last_;
}

}  // namespace specula
