// ForwardPass::run_mtp: the MTP (nextn) head over one session (model/weights.h's MtpWeights):
// x = eh_proj [enorm(embed(t_{p+1})) | hnorm(h_p)], the head's gated attention layer over its own
// KV cache (Session::Impl::mtp_kv, one layer) at MTP position p, its FFN when it has one, then
// logits = head(rms_norm(x) * shared_head_norm). The attention blocks are the main pass's: only
// the cache they read and write differs (ForwardPass::kv_of).
#include <algorithm>
#include <cstring>

#include "kernels/quants.h"
#include "model/forward_pass.h"
#include "model/model.h"
#include "model/ops.h"

namespace specula {

namespace {

template <class T>
void grow_to(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

}  // namespace

void ForwardPass::run_mtp(Session::Impl& seq, std::span<const token_id> next, const float* hidden,
                          ThreadPool& pool) {
    const MtpWeights& m = model_.mtp;
    const int n = static_cast<int>(next.size());
    seq.n_mtp = 0;
    if (n == 0) return;
    KVCache& kv = *seq.mtp_kv;
    reserve(n, kv.n_ctx(), pool.size());
    const size_t d = static_cast<size_t>(hp_.n_embd);
    // The input rows: [enorm(embed(t)) | hnorm(h)] -> eh_proj.
    grow_to(mtp_cat_, 2 * d * n);
    const WeightView& e = m.embed.data ? m.embed : model_.tok_embd;
    RopeParams rope = rope_;
    rope.freq_factors = rope_factors(kv.n_ctx());
    for (int t = 0; t < n; ++t) {
        float* cat = mtp_cat_.data() + 2 * d * t;
        dequantize_row(e.type, e.row(next[t]), cat, e.cols);
        rms_norm(cat, m.enorm, hp_.n_embd, hp_.rms_eps, cat);
        rms_norm(hidden + d * t, m.hnorm, hp_.n_embd, hp_.rms_eps, cat + d);
        rope_angles(rope, kv.n_past() + t, rope_cs_.data() + t * hp_.n_rot);
    }
    matmul(m.eh_proj, mtp_cat_.data(), 2 * hp_.n_embd, n, x_.data(), hp_.n_embd, pool, mm_);
    // The attention layer over the head's own cache; every row is an output row.
    const PassSegment seg{&seq, next, /*all_logits=*/true, 0};
    segs_ = std::span<const PassSegment>(&seg, 1);
    pool_ = &pool;
    off_.assign(1, 0);
    n_.assign(1, n);
    out_off_.assign(1, 0);
    n_out_.assign(1, n);
    n_rows_ = n_out_rows_ = rows_ = n;
    last_ = true;
    il_ = hp_.n_layer;  // no sliding window, no recurrent layer
    mtp_ = true;
    gated_attention_input(m.layer);
    qk_norm(m.layer);
    rope_and_cache();
    attention_output(m.layer);
    if (m.layer.ffn_gate.data || m.layer.ffn_gate_exps.data) ffn(m.layer);
    mtp_ = false;
    kv.append(next);
    // The head's output: its hidden rows (for chained drafts) and logits.
    grow_to(seq.mtp_hidden, d * n);
    std::memcpy(seq.mtp_hidden.data(), x_.data(), sizeof(float) * d * n);
    norm_rows(x_.data(), m.shared_head_norm ? m.shared_head_norm : model_.output_norm, n,
              h_.data());
    const size_t nv = static_cast<size_t>(hp_.n_vocab);
    grow_to(seq.mtp_logits, nv * n);
    const WeightView& head = m.head.data ? m.head : model_.output;
    matmul(head, h_.data(), hp_.n_embd, n, seq.mtp_logits.data(), hp_.n_vocab, pool, mm_);
    seq.n_mtp = n;
    segs_ = {};
}

}  // namespace specula
