// DraftBatch: see draft_batch.h.
#include "speculative/draft_batch.h"

namespace specula {

int DraftBatch::propose(std::span<DraftJob> jobs) {
    items_.clear();
    owner_.clear();
    for (DraftJob& j : jobs) {
        const std::span<const token_id> next = j.drafter->propose_begin(j.history, j.n_max, *j.out);
        if (next.empty()) continue;
        items_.push_back({&j.drafter->session(), next, /*all_logits=*/false});
        owner_.push_back(&j);
    }
    int passes = 0;
    while (!items_.empty()) {
        batch_.eval(items_);
        ++passes;
        // Each drafter chooses from its own row; the ones still drafting stay in the next pass.
        size_t n = 0;
        for (size_t i = 0; i < items_.size(); ++i) {
            DraftJob& j = *owner_[i];
            const std::span<const token_id> next = j.drafter->propose_next(*j.out);
            if (next.empty()) continue;
            items_[n] = {&j.drafter->session(), next, false};
            owner_[n++] = &j;
        }
        items_.resize(n);
        owner_.resize(n);
    }
    for (DraftJob& j : jobs) j.steps = j.drafter->proposal_steps();
    return passes;
}

}  // namespace specula
