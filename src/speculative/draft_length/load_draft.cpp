// LoadDraftLength: see load_draft.h.
#include "speculative/draft_length/load_draft.h"

#include <algorithm>
#include <utility>

namespace specula {

int LoadDraftLength::best(const std::vector<const DraftLengthController*>& slots, int rows_other,
                          double draft_ms, const PassCost& cost) const {
    if (slots.empty() || !cost.measured()) return -1;
    const int n = int(slots.size());
    int best_k = 0;
    double best_rate = -1;
    for (int k = 0; k <= p_.n_max; ++k) {
        double tokens = 0;
        for (const DraftLengthController* c : slots) tokens += c->expected_tokens(k);
        const double t = cost.cost(rows_other + n * (1 + k)) + k * n * draft_ms;
        const double rate = t > 0 ? tokens / t : 0;
        if (rate > best_rate) {
            best_rate = rate;
            best_k = k;
        }
    }
    return best_k;
}

int LoadDraftLength::choose(const std::vector<const DraftLengthController*>& slots, int rows_other,
                            double draft_ms, const PassCost& cost) {
    int k = best(slots, rows_other, draft_ms, cost);
    if (k < 0) k = slots.empty() ? 0 : slots.front()->choose(cost);  // nothing measured yet
    if (p_.explore_every > 0 && ++n_choices_ % p_.explore_every == 0) {
        const int dir = (n_choices_ / p_.explore_every) % 2 ? 1 : -1;  // alternately up, down
        k = k + dir >= 0 && k + dir <= p_.n_max ? k + dir : k - dir;
    }
    last_ = std::clamp(k, 0, p_.n_max);
    return last_;
}

}  // namespace specula
