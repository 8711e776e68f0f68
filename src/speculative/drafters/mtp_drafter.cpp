// MtpDrafter: see mtp_drafter.h.
#include "speculative/drafters/mtp_drafter.h"

#include <algorithm>

#include "common/error.h"
#include "model/load/model.h"
#include "model/session.h"
#include "sampling/constraints.h"

namespace specula {

MtpDrafter::MtpDrafter(const Model& model, const SamplingParams& sampling)
    : model_(model), chooser_(sampling, 0xBF58476D1CE4E5B9ull, 0x94D049BB133111EBull) {
    if (!model.has_mtp()) {
        fail(model.file().path(), ": --spec-type mtp needs an MTP head, and the model has none ",
             "(key '", model.hparams().arch, ".nextn_predict_layers' is 0 or missing, no ",
             "blk.N.nextn.* tensors); an MTP sidecar file can give one (-md)");
    }
}

std::span<const token_id> MtpDrafter::start(std::span<const token_id> history, int n_max,
                                            Draft& out) {
    out.clear();
    out.has_q = !chooser_.greedy();
    steps_ = 0;
    Session& t = *target_;
    const int L = int(history.size()) - 1;
    if (n_max <= 0 || L < 1 || t.n_logits() == 0 || t.n_past() != L) {
        fresh_ = true;  // nothing to draft from: the head starts anew next time
        return {};
    }
    // The target's hidden rows: row last of position L - 1, rows 0 .. last of the positions
    // before it.
    const int last = last_row_ >= 0 ? last_row_ : t.n_logits() - 1;
    last_row_ = -1;
    if (last >= t.n_logits()) {
        fresh_ = true;
        return {};
    }
    const int first_pos = L - 1 - last;  // the first position with a hidden state
    int pos = fresh_ ? first_pos : base_ + t.mtp_n_past();
    if (pos < first_pos || pos > L - 1) pos = first_pos, fresh_ = true;
    if (fresh_) {
        t.mtp_rollback(0);
        base_ = first_pos;
        fresh_ = false;
    } else {
        t.mtp_rollback(pos - base_);
    }
    const size_t d = size_t(model_.hparams().n_embd);
    const int n = L - pos;  // positions pos .. L - 1
    next_.assign(history.begin() + pos + 1, history.begin() + L + 1);
    hidden_.resize(d * size_t(n));
    for (int i = 0; i < n; ++i) {
        const float* h = t.hidden(last - (L - 1 - (pos + i)));
        std::copy(h, h + d, hidden_.begin() + d * size_t(i));
    }
    // Guided by the target's constraints (same vocabulary), rewound after the proposal.
    guide_now_ = guide_ && guide_->n_vocab() == model_.hparams().n_vocab ? guide_ : nullptr;
    if (guide_now_) mark_ = guide_now_->mark();
    n_max_ = n_max;
    keep_ = L - base_;  // positions up to L - 1: verified inputs only
    row_ = n - 1;       // the first pass's last row gives d_1
    ++steps_;
    return next_;
}

std::span<const token_id> MtpDrafter::next(Draft& out) {
    Session& t = *target_;
    const token_id tok =
        chooser_.choose(t.mtp_logits(row_), model_.hparams().n_vocab, out, guide_now_);
    if (tok < 0) return finish();
    out.tokens.push_back(tok);
    if (out.size() >= n_max_ || t.mtp_n_past() >= t.n_ctx()) return finish();
    // Chained: position L + i takes [d_{i+1}, the head's own output hidden row].
    const size_t d = size_t(model_.hparams().n_embd);
    const float* h = t.mtp_hidden(row_);
    hidden_.assign(h, h + d);
    next_.assign(1, tok);
    row_ = 0;
    ++steps_;
    return next_;
}

std::span<const token_id> MtpDrafter::finish() {
    target_->mtp_rollback(keep_);
    if (guide_now_) guide_now_->rewind(mark_);
    guide_now_ = nullptr;
    return {};
}

}  // namespace specula
