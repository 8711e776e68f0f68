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

// Evaluates heads_: one MTP head pass per target model (a lone session evaluates on its own).
void DraftBatch::eval_heads() {
    if (heads_.size() == 1) {
        heads_[0].session->eval_mtp(heads_[0].next, heads_[0].hidden);
        return;
    }
    if (!pool_) fail("draft batch: several MTP drafters in one step need a shared thread pool");
    std::vector<bool> done(heads_.size(), false);
    for (size_t i = 0; i < heads_.size(); ++i) {
        if (done[i]) continue;
        const Model& m = heads_[i].session->model();
        head_group_.clear();
        for (size_t j = i; j < heads_.size(); ++j) {
            if (done[j] || &heads_[j].session->model() != &m) continue;
            head_group_.push_back(heads_[j]);
            done[j] = true;
        }
        evaluator(m).eval_mtp(head_group_);
    }
}

// Queues a drafter's rows for the next round: its head's or its session's.
void DraftBatch::add(DraftJob& j, std::span<const token_id> todo) {
    if (Session* head = j.drafter->head_session()) {
        heads_.push_back({head, todo, j.drafter->head_hidden()});
        head_owner_.push_back(&j);
    } else {
        items_.push_back({j.drafter->session(), todo, /*all_logits=*/false});
        owner_.push_back(&j);
    }
}

int DraftBatch::propose(std::span<DraftJob> jobs) {
    items_.clear();
    owner_.clear();
    heads_.clear();
    head_owner_.clear();
    for (DraftJob& j : jobs) {
        const std::span<const token_id> todo = j.drafter->start(j.history, j.n_max, *j.out);
        if (!todo.empty()) add(j, todo);
    }
    int rounds = 0;
    std::vector<DraftJob*>& round = round_;
    while (!items_.empty() || !heads_.empty()) {
        if (!items_.empty()) eval_round();
        if (!heads_.empty()) eval_heads();
        ++rounds;
        // Each drafter chooses from its own rows; the ones still drafting stay for the next round.
        round.assign(owner_.begin(), owner_.end());
        round.insert(round.end(), head_owner_.begin(), head_owner_.end());
        items_.clear();
        owner_.clear();
        heads_.clear();
        head_owner_.clear();
        for (DraftJob* j : round) {
            const std::span<const token_id> todo = j->drafter->next(*j->out);
            if (!todo.empty()) add(*j, todo);
        }
    }
    for (DraftJob& j : jobs) j.steps = j.drafter->steps();
    return rounds;
}

}  // namespace specula
