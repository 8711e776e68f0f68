// Eagle3Drafter: see eagle3.h.
#include "speculative/drafters/eagle3.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "model/session.h"
#include "speculative/drafters/captured_features.h"

namespace specula {

Eagle3Drafter::Eagle3Drafter(const Eagle3Head& head, const SamplingParams& sampling, int n_ctx,
                             KVType type_k, KVType type_v, float p_min)
    : head_(head),
      st_(head, n_ctx > 0 ? n_ctx : resolve_ctx(head.target->hparams(), 0), type_k, type_v),
      chooser_(sampling, 0xD6E8FEB86659FD93ull, 0xA0761D6478BD642Full),
      p_min_(p_min) {}

void Eagle3Drafter::attach(Session* target) {
    target_ = target;
    if (target && target->capture_width() != int(head_.capture.size()) * head_.target_embd) {
        fail(head_.file->path(), ": the target session captures ", target->capture_width(),
             " floats per row, the head reads ", head_.capture.size(),
             " layers (SessionParams::capture_layers = Eagle3Head::capture)");
    }
}

void Eagle3Drafter::features(int pos, int L) {
    const Session& t = *target_;
    const int last = last_row_ >= 0 ? last_row_ : t.n_captured() - 1;
    gather_captured_features(t, last, pos, L, head_.column, head_.target_embd, feat_);
}

std::span<const token_id> Eagle3Drafter::start(std::span<const token_id> history, int n_max,
                                               Draft& out) {
    out.clear();
    out.has_q = !chooser_.greedy();
    steps_ = 0;
    Session& t = *target_;
    const int L = int(history.size()) - 1;
    const int last = last_row_ >= 0 ? last_row_ : t.n_captured() - 1;
    if (n_max <= 0 || L < 1 || t.n_captured() == 0 || t.n_past() != L || last >= t.n_captured()) {
        fresh_ = true;  // nothing to draft from: the head starts anew next time
        last_row_ = -1;
        return {};
    }
    const int first_pos = L - 1 - last;  // the first position with captured features
    int pos = fresh_ ? first_pos : base_ + st_.kv.n_past();
    // The head's cache must hold the history's tokens (position i: t_{base + i + 1}).
    const auto cached = st_.kv.tokens();
    const bool follows = size_t(base_) + 1 + cached.size() <= history.size() &&
                         std::equal(cached.begin(), cached.end(), history.begin() + base_ + 1);
    if (!fresh_ && (pos < first_pos || pos > L - 1 || !follows)) fresh_ = true, pos = first_pos;
    if (fresh_) {
        st_.kv.truncate(0);
        base_ = first_pos;
        fresh_ = false;
    }
    features(pos, L);
    last_row_ = -1;
    ThreadPool& pool = t.pool();
    const int n = L - pos;  // positions pos .. L - 1
    eagle3_encode(head_, st_, feat_.data(), head_.n_features(), n, pool);
    next_.assign(history.begin() + pos + 1, history.begin() + L + 1);
    eagle3_decode(head_, st_, next_, st_.g.data(), pos, pool);
    ++steps_;
    chain(n_max, out, L - base_);
    return {};  // the whole proposal ran here
}

// Chooses d_1 from the first pass and chains the head on its own output up to n_max tokens; then
// the cache keeps `keep` positions (up to L - 1: verified inputs only).
void Eagle3Drafter::chain(int n_max, Draft& out, int keep) {
    const int nv = head_.target->hparams().n_vocab;
    Constraints* guide = guide_ && guide_->n_vocab() == nv ? guide_ : nullptr;
    Constraints::Mark mark;
    if (guide) mark = guide->mark();
    ThreadPool& pool = target_->pool();
    const size_t d = size_t(head_.hp.n_embd);
    for (;;) {
        const token_id tok = chooser_.choose(st_.logits.data(), nv, out, guide, p_min_);
        if (tok < 0) break;
        out.tokens.push_back(tok);
        if (out.size() >= n_max || st_.kv.n_past() >= st_.kv.n_ctx()) break;
        // Position L + i takes [d_{i+1}, the head's own pre-norm output of the row before].
        const size_t last = next_.size() - 1;  // the last pass's last row
        g_.assign(st_.hidden.begin() + ptrdiff_t(d * last),
                  st_.hidden.begin() + ptrdiff_t(d * (last + 1)));
        next_.assign(1, tok);
        eagle3_decode(head_, st_, next_, g_.data(), base_ + st_.kv.n_past(), pool);
        ++steps_;
    }
    st_.kv.truncate(keep);
    if (guide) guide->rewind(mark);
}

}  // namespace specula
