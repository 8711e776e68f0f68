// DraftBatch: see draft_batch.h.
#include "speculative/drafters/draft_batch.h"

#include "common/error.h"

namespace specula {

BatchEvaluator& DraftBatch::evaluator(const Model& m) {
    for (auto& e : evals_)
        if (&e->model() == &m) return *e;
    evals_.push_back(std::make_unique<BatchEvaluator>(m, *pool_));
    return *evals_.back();
}

namespace {

// Calls eval(group) once per model among items' sessions, group holding that model's items in
// their order.
template <class Item, class Eval>
void by_model(const std::vector<Item>& items, std::vector<Item>& group, Eval&& eval) {
    std::vector<bool> done(items.size(), false);
    for (size_t i = 0; i < items.size(); ++i) {
        if (done[i]) continue;
        const Model& m = items[i].session->model();
        group.clear();
        for (size_t j = i; j < items.size(); ++j) {
            if (done[j] || &items[j].session->model() != &m) continue;
            group.push_back(items[j]);
            done[j] = true;
        }
        eval(m, group);
    }
}

}  // namespace

// Evaluates items_: one pass per draft model (a lone session evaluates on its own).
void DraftBatch::eval_round() {
    if (items_.size() == 1) {
        items_[0].session->eval(items_[0].tokens, /*all_logits=*/false);
        return;
    }
    if (!pool_) fail("draft batch: several drafters in one step need a shared thread pool");
    by_model(items_, group_,
             [&](const Model& m, const std::vector<BatchItem>& g) { evaluator(m).eval(g); });
}

// Evaluates heads_: one MTP head pass per target model (a lone session evaluates on its own).
void DraftBatch::eval_heads() {
    if (heads_.size() == 1) {
        heads_[0].session->eval_mtp(heads_[0].next, heads_[0].hidden);
        return;
    }
    if (!pool_) fail("draft batch: several MTP drafters in one step need a shared thread pool");
    by_model(heads_, head_group_,
             [&](const Model& m, const std::vector<MtpItem>& g) { evaluator(m).eval_mtp(g); });
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

// The jobs whose drafters share a joint key, one propose_joint() call per key.
void DraftBatch::propose_joint() {
    for (size_t i = 0; i < joint_.size(); ++i) {
        if (!joint_[i]) continue;
        const void* key = joint_[i]->drafter->joint_key();
        joint_group_.clear();
        for (size_t k = i; k < joint_.size(); ++k) {
            if (!joint_[k] || joint_[k]->drafter->joint_key() != key) continue;
            joint_group_.push_back(joint_[k]);
            joint_[k] = nullptr;
        }
        joint_group_.front()->drafter->propose_joint(joint_group_);
    }
}

int DraftBatch::propose(std::span<DraftJob> jobs) {
    items_.clear();
    owner_.clear();
    heads_.clear();
    head_owner_.clear();
    joint_.clear();
    for (DraftJob& j : jobs) {
        if (j.drafter->joint_key()) {
            joint_.push_back(&j);
            continue;
        }
        const std::span<const token_id> todo = j.drafter->start(j.history, j.n_max, *j.out);
        if (!todo.empty()) add(j, todo);
    }
    propose_joint();
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
