// BatchEvaluator: see batch_eval.h. The pass itself is ForwardPass (forward.cpp), the same code
// Session::eval runs for one sequence.
#include "model/batch_eval.h"

#include <vector>

#include "common/error.h"
#include "model/forward_pass.h"
#include "model/state/sequence_state.h"

namespace specula {

struct BatchEvaluator::State {
    explicit State(const Model& m) : pass(m) {}
    ForwardPass pass;
    std::vector<PassSegment> segs;
    std::vector<MtpSegment> mtp_segs;
};

namespace {

// The checks eval and eval_mtp share: a session, of this model, listed once.
template <class Item>
void check_sessions(std::span<const Item> items, const Model& model) {
    for (size_t i = 0; i < items.size(); ++i) {
        const Session* s = items[i].session;
        if (!s) fail("eval_batch: item ", i, " has no session");
        if (&s->model() != &model) fail("eval_batch: item ", i, "'s session is of another model");
        for (size_t j = 0; j < i; ++j)
            if (items[j].session == s)
                fail("eval_batch: items ", j, " and ", i, " share a session");
    }
}

// The pass the segments' sessions share (SessionParams::shared_pass), else the evaluator's own.
template <class Seg>
ForwardPass& shared_or(std::span<const Seg> segs, ForwardPass& own) {
    ForwardPass* p = segs.empty() ? nullptr : segs[0].seq->pass.get();
    for (const Seg& sg : segs)
        if (sg.seq->pass.get() != p) return own;
    return p ? *p : own;
}

}  // namespace

BatchEvaluator::BatchEvaluator(const Model& model, ThreadPool& pool)
    : model_(model), pool_(pool), state_(std::make_unique<State>(model)) {}

BatchEvaluator::~BatchEvaluator() = default;

void BatchEvaluator::eval(std::span<const BatchItem> items) {
    std::vector<PassSegment>& segs = state_->segs;
    segs.clear();
    check_sessions(items, model_);
    for (size_t i = 0; i < items.size(); ++i) {
        try {
            items[i].session->impl_->check(items[i].tokens);
        } catch (const Error& e) {
            fail("eval_batch: item ", i, ": ", e.what());
        }
    }
    // Longer than one of its session's passes (SessionParams::n_ubatch, a ring cache's
    // max_pass): Session::eval, in pieces.
    std::vector<const BatchItem*> alone;
    for (const BatchItem& it : items) {
        if (it.tokens.empty()) {
            it.session->impl_->n_logits = 0;
            it.session->impl_->n_captured = 0;
            continue;
        }
        if (it.tokens.size() > size_t(it.session->impl_->max_pass())) {
            alone.push_back(&it);
            continue;
        }
        segs.push_back({it.session->impl_.get(), it.tokens, it.all_logits});
    }
    // Batch invariance makes their logits the same as in the shared pass.
    for (const BatchItem* it : alone) it->session->eval(it->tokens, it->all_logits);
    // A session whose first layers run on a device (model/load/offload.h) keeps its own pass; the
    // CPU sessions share one.
    bool any_offload = false;
    for (const PassSegment& sg : segs) any_offload = any_offload || sg.seq->offload;
    if (!any_offload) {
        shared_or(std::span<const PassSegment>(segs), state_->pass).run(segs, pool_);
        return;
    }
    for (const PassSegment& sg : segs) {
        if (!sg.seq->pass) sg.seq->pass = std::make_shared<ForwardPass>(model_);
        sg.seq->pass->run(std::span(&sg, 1), pool_);
    }
}

void BatchEvaluator::eval_mtp(std::span<const MtpItem> items) {
    check_sessions(items, model_);
    for (size_t i = 0; i < items.size(); ++i) {
        try {
            items[i].session->impl_->check_mtp(items[i].next);
        } catch (const Error& e) {
            fail("eval_mtp batch: item ", i, ": ", e.what());
        }
    }
    std::vector<MtpSegment>& segs = state_->mtp_segs;
    segs.clear();
    for (const MtpItem& it : items) {
        it.session->impl_->n_mtp = 0;
        if (!it.next.empty()) segs.push_back({it.session->impl_.get(), it.next, it.hidden});
    }
    if (!segs.empty())
        shared_or(std::span<const MtpSegment>(segs), state_->pass).run_mtp(segs, pool_);
}

}  // namespace specula
