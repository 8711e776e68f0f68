// DFlashDrafter: see dflash.h.
#include "speculative/drafters/dflash.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "model/session.h"
#include "speculative/drafters/captured_features.h"

namespace specula {

DFlashDrafter::DFlashDrafter(const DFlashHead& head, const SamplingParams& sampling, int n_ctx,
                             KVType type_k, KVType type_v, float p_min)
    : head_(head),
      st_(head, (n_ctx > 0 ? n_ctx : resolve_ctx(head.target->hparams(), 0)) + head.block_size,
          type_k, type_v),
      chooser_(sampling, 0x9E3779B97F4A7C15ull, 0xD1B54A32D192ED03ull),
      p_min_(p_min) {}

void DFlashDrafter::attach(Session* target) {
    target_ = target;
    if (target && target->capture_width() != head_.n_features()) {
        fail(head_.file->path(), ": the target session captures ", target->capture_width(),
             " floats per row, the drafter reads ", head_.capture.size(),
             " layers (SessionParams::capture_layers = DFlashHead::capture)");
    }
}

void DFlashDrafter::features(int pos, int L) {
    const Session& t = *target_;
    const int last = last_row_ >= 0 ? last_row_ : t.n_captured() - 1;
    gather_captured_features(t, last, pos, L, head_.column, head_.target->hparams().n_embd, feat_);
}

std::span<const token_id> DFlashDrafter::start(std::span<const token_id> history, int n_max,
                                               Draft& out) {
    out.clear();
    out.has_q = !chooser_.greedy();
    steps_ = 0;
    Session& t = *target_;
    const int L = int(history.size()) - 1;
    const int last = last_row_ >= 0 ? last_row_ : t.n_captured() - 1;
    if (n_max <= 0 || L < 1 || t.n_captured() == 0 || t.n_past() != L || last >= t.n_captured()) {
        fresh_ = true;  // nothing to draft from: the context starts anew next time
        last_row_ = -1;
        return {};
    }
    const int first_pos = L - 1 - last;  // the first position with captured features
    int pos = fresh_ ? first_pos : base_ + st_.kv.n_past();
    // The cache must hold the history's tokens (row i: t_{base + i}).
    const auto cached = st_.kv.tokens();
    const bool follows = size_t(base_) + cached.size() <= history.size() &&
                         std::equal(cached.begin(), cached.end(), history.begin() + base_);
    if (!fresh_ && (pos < first_pos || pos > L || !follows)) fresh_ = true, pos = first_pos;
    if (fresh_) {
        st_.kv.truncate(0);
        base_ = first_pos;
        fresh_ = false;
    }
    features(pos, L);
    last_row_ = -1;
    ThreadPool& pool = t.pool();
    dflash_context(head_, st_, history.subspan(size_t(pos), size_t(L - pos)), feat_.data(),
                   head_.n_features(), pos, pool);
    const int n = std::min(n_max, head_.block_size - 1);
    dflash_block(head_, st_, history[size_t(L)], n, L, pool);
    steps_ = 1;
    choose(n, out);
    return {};  // the whole proposal ran here
}

// The drafts from the block's rows in order, each row masked by the target's constraints after
// the drafts before it.
void DFlashDrafter::choose(int n, Draft& out) {
    const int nv = head_.target->hparams().n_vocab;
    Constraints* guide = guide_ && guide_->n_vocab() == nv ? guide_ : nullptr;
    Constraints::Mark mark;
    if (guide) mark = guide->mark();
    for (int i = 0; i < n; ++i) {
        const token_id tok =
            chooser_.choose(st_.logits.data() + size_t(nv) * size_t(i), nv, out, guide, p_min_);
        if (tok < 0) break;
        out.tokens.push_back(tok);
    }
    if (guide) guide->rewind(mark);
}

}  // namespace specula
