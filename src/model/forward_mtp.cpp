// ForwardPass::run_mtp: the MTP (nextn) head over one or more sessions in one pass
// (model/weights.h's MtpWeights; each row reads only its own session's head cache, so a row's
// result does not depend on what shares the pass): x = eh_proj [enorm(embed(t_{p+1})) |
// hnorm(h_p)], the head's gated attention layer over its own KV cache (Session::Impl::mtp_kv, one
// layer) at MTP position p, its FFN when it has one, then logits = head(rms_norm(x) *
// shared_head_norm). The attention blocks are the main pass's: only the cache they read and write
// differs (ForwardPass::kv_of).
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

void ForwardPass::run_mtp(std::span<const MtpSegment> segs, ThreadPool& pool) {
    const MtpWeights& m = model_.mtp;
    const size_t ns = segs.size();
    const size_t d = static_cast<size_t>(hp_.n_embd);
    int n = 0, max_ctx = 1;
    for (const MtpSegment& sg : segs) {
        sg.seq->n_mtp = 0;
        n += static_cast<int>(sg.next.size());
        max_ctx = std::max(max_ctx, sg.seq->mtp_kv->n_ctx());
    }
    if (n == 0) return;
    reserve(n, ns > 1 ? n : 0, max_ctx, pool.size());
    // The input rows: [enorm(embed(t)) | hnorm(h)] -> eh_proj, each at its session's position.
    grow_to(mtp_cat_, 2 * d * n);
    const WeightView& e = m.embed.data ? m.embed : model_.tok_embd;
    pass_segs_.clear();
    off_.assign(ns, 0);
    n_.assign(ns, 0);
    int row = 0;
    for (size_t s = 0; s < ns; ++s) {
        const MtpSegment& sg = segs[s];
        const KVCache& kv = *sg.seq->mtp_kv;
        RopeParams rope = rope_;
        rope.freq_factors = rope_factors(kv.n_ctx());
        off_[s] = row;
        n_[s] = static_cast<int>(sg.next.size());
        for (int t = 0; t < n_[s]; ++t, ++row) {
            float* cat = mtp_cat_.data() + 2 * d * row;
            dequantize_row(e.type, e.row(sg.next[t]), cat, e.cols);
            rms_norm(cat, m.enorm, hp_.n_embd, hp_.rms_eps, cat);
            rms_norm(sg.hidden + d * t, m.hnorm, hp_.n_embd, hp_.rms_eps, cat + d);
            rope_angles(rope, kv.n_past() + t, rope_cs_.data() + row * hp_.n_rot);
        }
        pass_segs_.push_back({sg.seq, sg.next, /*all_logits=*/true, 0});
    }
    matmul(m.eh_proj, mtp_cat_.data(), 2 * hp_.n_embd, n, x_.data(), hp_.n_embd, pool, mm_);
    // The attention layer over each session's own head cache; every row is an output row.
    segs_ = pass_segs_;
    pool_ = &pool;
    out_off_ = off_;
    n_out_ = n_;
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
    for (const MtpSegment& sg : segs) sg.seq->mtp_kv->append(sg.next);
    // The head's output: its hidden rows after shared_head_norm (the next chained draft's input,
    // as ik_llama.cpp and vLLM chain it) and logits.
    norm_rows(x_.data(), m.shared_head_norm ? m.shared_head_norm : model_.output_norm, n,
              h_.data());
    const size_t nv = static_cast<size_t>(hp_.n_vocab);
    const WeightView& head = m.head.data ? m.head : model_.output;
    // One session writes its logits in place; several go through the pass's buffer.
    Session::Impl& one = *segs[0].seq;
    if (ns == 1) grow_to(one.mtp_logits, nv * n);
    float* logits = ns == 1 ? one.mtp_logits.data() : logits_.data();
    matmul(head, h_.data(), hp_.n_embd, n, logits, hp_.n_vocab, pool, mm_);
    for (size_t s = 0; s < ns; ++s) {
        Session::Impl& seq = *segs[s].seq;
        const size_t r0 = static_cast<size_t>(off_[s]), rows = static_cast<size_t>(n_[s]);
        grow_to(seq.mtp_hidden, d * rows);
        std::memcpy(seq.mtp_hidden.data(), h_.data() + d * r0, sizeof(float) * d * rows);
        if (ns > 1) {
            grow_to(seq.mtp_logits, nv * rows);
            std::memcpy(seq.mtp_logits.data(), logits_.data() + nv * r0, sizeof(float) * nv * rows);
        }
        seq.n_mtp = n_[s];
    }
    segs_ = {};
}

}  // namespace specula
