// MedusaDrafter: see medusa_drafter.h.
#include "speculative/drafters/medusa_drafter.h"

#include "common/error.h"
#include "model/session.h"
#include "speculative/drafters/draft_batch.h"

namespace specula {

const float* MedusaDrafter::hidden_row(int n_max) const {
    if (n_max <= 0 || !target_) return nullptr;
    const int n_rows = target_->n_logits();
    const int row = row_ < 0 ? n_rows - 1 : row_;
    // No pass since the sequence began (a prompt the cache held whole) or a row out of reach:
    // nothing to draft from this step.
    if (row < 0 || row >= n_rows) return nullptr;
    return target_->hidden(row);
}

std::span<const token_id> MedusaDrafter::start(std::span<const token_id> history, int n_max,
                                               Draft& out) {
    out.clear();
    out.has_q = false;
    if (const float* h = hidden_row(n_max))
        medusa_draft(heads_, st_, h, n_max, out.tokens, target_->pool());
    return {};
}

void MedusaDrafter::propose_joint(std::span<DraftJob* const> jobs) {
    rows_.clear();
    ns_.clear();
    outs_.clear();
    ThreadPool* pool = nullptr;
    for (DraftJob* j : jobs) {
        // Every drafter of this key is a MedusaDrafter of these heads (joint_key: &heads_).
        const auto& d = static_cast<const MedusaDrafter&>(*j->drafter);
        j->out->clear();
        j->out->has_q = false;
        const float* h = d.hidden_row(j->n_max);
        if (!h) continue;
        rows_.push_back(h);
        ns_.push_back(j->n_max);
        outs_.push_back(&j->out->tokens);
        if (!pool) pool = &d.target_->pool();
    }
    if (pool) medusa_draft_rows(heads_, st_, rows_, ns_, outs_, *pool);
}

}  // namespace specula
