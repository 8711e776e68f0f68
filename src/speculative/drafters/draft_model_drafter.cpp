// DraftModelDrafter: see draft_model_drafter.h.
#include "speculative/drafters/draft_model_drafter.h"

#include <algorithm>

#include "sampling/constraints.h"

namespace specula {

namespace {

SessionParams session_params(const DraftModelParams& p) {
    SessionParams sp{p.n_ctx, p.n_threads, p.type_k, p.type_v, p.pool};
    sp.shared_pass = p.shared_pass;
    sp.kv_small_pages = p.kv_small_pages;
    sp.n_ubatch = p.n_ubatch;
    return sp;
}

}  // namespace

DraftModelDrafter::DraftModelDrafter(const Model& draft, const DraftModelParams& params)
    : model_(draft),
      params_(params),
      session_(std::make_unique<Session>(draft, session_params(params))),
      chooser_(params.sampling, 0x9E3779B97F4A7C15ull, 0xD1B54A32D192ED03ull) {
    batch_.reserve(64);
}

void DraftModelDrafter::eval(std::span<const token_id> tokens) {
    session_->eval(tokens, /*all_logits=*/false);  // only the last token's prediction is used
}

void DraftModelDrafter::begin(std::span<const token_id> prompt) {
    session_->reset();
    n_history_ = 0;
    // Everything but the last prompt token, which the first proposal evaluates (it needs its
    // logits). A prompt longer than the draft's context is left for sync() to decline.
    if (prompt.size() >= 2 && int(prompt.size()) - 1 <= session_->n_ctx()) {
        eval(prompt.first(prompt.size() - 1));
        max_pass_ = std::max(max_pass_, int(prompt.size()) - 1);
    }
}

// Rolls the cache back to the longest prefix shared with `history`, keeping at least one history
// token unevaluated (its logits start the proposal). Returns the new cache length.
int DraftModelDrafter::sync(std::span<const token_id> history) {
    const int k = session_->common_prefix(history.first(history.size() - 1));
    if (k < session_->n_past()) session_->rollback(k);
    return k;
}

std::span<const token_id> DraftModelDrafter::start(std::span<const token_id> history, int n_max,
                                                   Draft& out) {
    out.clear();
    out.has_q = !chooser_.greedy();
    n_history_ = history.size();
    steps_ = steps_left_ = 0;
    guide_now_ = nullptr;
    if (history.empty() || n_max <= 0) return {};

    int n_cached = sync(history);
    // A long catch-up: all but the last max_pass_ tokens now, in passes of max_pass_.
    while (int(history.size()) - n_cached > max_pass_) {
        const int n = std::min(max_pass_, int(history.size()) - n_cached - max_pass_);
        eval(history.subspan(size_t(n_cached), size_t(n)));
        n_cached += n;
    }
    const int n_pending = int(history.size()) - n_cached;
    // Evaluations needed: the pending batch, then one per further draft token.
    const int room = session_->n_ctx() - n_cached;
    n_max = std::min(n_max, room - n_pending + 1);
    if (n_max <= 0) return {};

    // Guided by the target's constraints: only their first n_vocab ids (a draft vocabulary may be
    // larger; those ids cannot be verified anyway).
    guide_now_ = guide_ && guide_->n_vocab() <= model_.hparams().n_vocab ? guide_ : nullptr;
    n_vocab_now_ = guide_now_ ? guide_now_->n_vocab() : model_.hparams().n_vocab;
    if (guide_now_) mark_ = guide_now_->mark();
    steps_left_ = n_max;
    batch_.assign(history.begin() + n_cached, history.end());
    return batch_;
}

std::span<const token_id> DraftModelDrafter::next(Draft& out) {
    ++steps_;
    const int n_vocab = n_vocab_now_;
    const float* logits = session_->logits(session_->n_logits() - 1);
    const token_id tok = chooser_.choose(logits, n_vocab, out, guide_now_, params_.p_min);
    if (tok < 0) return end_proposal();
    out.tokens.push_back(tok);
    if (--steps_left_ == 0) return end_proposal();
    batch_.assign(1, tok);
    return batch_;
}

std::span<const token_id> DraftModelDrafter::end_proposal() {
    if (guide_now_) guide_now_->rewind(mark_);
    guide_now_ = nullptr;
    steps_left_ = 0;
    return {};
}

void DraftModelDrafter::accept(int n_kept) {
    // The cache holds history + d_1..d_{n-1}; keep history + d_1..d_{n_kept}. The target's own
    // token that follows is evaluated by the next proposal.
    // A hybrid draft model (recurrent layers) returns only inside its last pass: further back,
    // the next proposal's sync() rolls back to the longest prefix it can return to (and
    // re-evaluates from there).
    const int keep =
        int(std::min(size_t(session_->n_past()), n_history_ + size_t(std::max(n_kept, 0))));
    if (keep < session_->n_past() && session_->can_rollback(keep)) session_->rollback(keep);
}

}  // namespace specula
