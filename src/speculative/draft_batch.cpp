// DraftBatch: see draft_batch.h.
#include "speculative/draft_batch.h"

#include "common/error.h"

namespace specula {

BatchEvaluator& DraftBatch::evaluator(const Model& m) {
    for (auto& e : evals_)
        if (&e->model() == &m) return *e;
    evals_.push_back(std::make_unique<BatchEvaluator>(m, *pool_));
    return *evals_.back();
}

// Evaluates items_: one pass per draft model (a lone session evaluates on its own).
void DraftBatch::eval_round() {
    if (items_.size() == 1) {
        items_[0].session->eval(items_[0].tokens, /*all_logits=*/false);
        return;
    }
    if (!pool_) fail("draft batch: several drafters in one step need a shared thread pool");
    std::vector<bool> done(items_.size(), false);
    for (size_t i = 0; i < items_.size(); ++i) {
        if (done[i]) continue;
        const Model& m = items_[i].session->model();
        group_.clear();
        for (size_t j = i; j < items_.size(); ++j) {
            if (done[j] || &items_[j].session->model() != &m) continue;
            group_.push_back(items_[j]);
            done[j] = true;
        }
        evaluator(m).eval(group_);
    }
}

int DraftBatch::propose(std::span<DraftJob> jobs) {
    items_.clear();
    owner_.clear();
    for (DraftJob& j : jobs) {
        const std::span<const token_id> todo = j.drafter->start(j.history, j.n_max, *j.out);
        if (todo.empty()) continue;
        items_.push_back({j.drafter->session(), todo, /*all_logits=*/false});
        owner_.push_back(&j);
    }
    int rounds = 0;
    while (!items_.empty()) {
        eval_round();
        ++rounds;
        // Each drafter chooses from its own row; the ones still drafting stay for the next round.
        size_t n = 0;
        for (size_t i = 0; i < items_.size(); ++i) {
            DraftJob& j = *owner_[i];
            const std::span<const token_id> todo = j.drafter->next(*j.out);
            if (todo.empty()) continue;
            items_[n] = {j.drafter->session(), todo, false};
            owner_[n++] = &j;
        }
        items_.resize(n);
        owner_.resize(n);
    }
    for (DraftJob& j : jobs) j.steps = j.drafter->steps();
    return rounds;
}

}  // namespace specula
