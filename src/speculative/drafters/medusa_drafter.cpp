// MedusaDrafter: see medusa_drafter.h.
#include "speculative/drafters/medusa_drafter.h"

#include "common/error.h"
#include "model/session.h"

namespace specula {

std::span<const token_id> MedusaDrafter::start(std::span<const token_id> history, int n_max,
                                               Draft& out) {
    out.clear();
    out.has_q = false;
    if (n_max <= 0 || !target_) return {};
    const int n_rows = target_->n_logits();
    const int row = row_ < 0 ? n_rows - 1 : row_;
    // No pass since the sequence began (a prompt the cache held whole) or a row out of reach:
    // nothing to draft from this step.
    if (row < 0 || row >= n_rows) return {};
    medusa_draft(heads_, st_, target_->hidden(row), n_max, out.tokens, target_->pool());
    return {};
}

}  // namespace specula
