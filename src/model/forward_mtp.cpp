// ForwardPass::run_mtp: the MTP (nextn) head over one or more sessions in one pass
// (model/load/weights.h's MtpWeights; each row reads only its own session's head cache, so a row's
// result does not depend on what shares the pass): x = eh_proj [enorm(embed(t_{p+1})) |
// hnorm(h_p)], the architecture's head layer (ArchSpec::mtp_block) over its own KV cache
// (SequenceState::mtp_kv, one layer) at MTP position p, then logits = head(rms_norm(x) *
// shared_head_norm). The head layer runs the shared blocks: only the cache they read and write
// differs (PassState::mtp, kv_of).
#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "kernels/ops.h"
#include "kernels/quants.h"
#include "model/forward_pass.h"
#include "model/load/arch.h"
#include "model/load/model.h"

namespace specula {

void ForwardPass::run_mtp(std::span<const MtpSegment> segs, ThreadPool& pool) {
    const Model& model = st_.model;
    const HParams& hp = st_.hp;
    const MtpWeights& m = model.mtp;
    const ArchSpec& arch = model.arch();
    if (!arch.mtp_block) fail(model.file().path(), ": ", hp.arch, " has no MTP head layer");
    const size_t ns = segs.size();
    const size_t d = static_cast<size_t>(hp.n_embd);
    int n = 0, max_ctx = 1;
    for (const MtpSegment& sg : segs) {
        sg.seq->n_mtp = 0;
        n += static_cast<int>(sg.next.size());
        max_ctx = std::max(max_ctx, sg.seq->mtp_kv->n_ctx());
    }
    if (n == 0) return;
    reserve(n, ns > 1 ? n : 0, max_ctx, pool.size());
    // The input rows: [enorm(embed(t)) | hnorm(h)] -> eh_proj, each at its session's position.
    grow(mtp_cat_, 2 * d * n);
    const WeightView& e = m.embed.data ? m.embed : model.tok_embd;
    pass_segs_.clear();
    st_.off.assign(ns, 0);
    st_.n.assign(ns, 0);
    int row = 0;
    for (size_t s = 0; s < ns; ++s) {
        const MtpSegment& sg = segs[s];
        const KVCache& kv = *sg.seq->mtp_kv;
        RopeParams rope = st_.rope;
        rope.freq_factors = rope_factors(kv.n_ctx());
        st_.off[s] = row;
        st_.n[s] = static_cast<int>(sg.next.size());
        for (int t = 0; t < st_.n[s]; ++t, ++row) {
            float* cat = mtp_cat_.data() + 2 * d * row;
            dequantize_row(e.type, e.row(sg.next[t]), cat, e.cols);
            rms_norm(cat, m.enorm, hp.n_embd, hp.rms_eps, cat);
            rms_norm(sg.hidden + d * t, m.hnorm, hp.n_embd, hp.rms_eps, cat + d);
            rope_angles(rope, kv.n_past() + t, st_.rope_cs.data() + row * hp.max_n_rot());
        }
        pass_segs_.push_back({sg.seq, sg.next, /*all_logits=*/true, 0});
    }
    matmul(m.eh_proj, mtp_cat_.data(), 2 * hp.n_embd, n, st_.x.data(), hp.n_embd, pool, st_.mm);
    // The head layer over each session's own head cache; every row is an output row.
    st_.segs = pass_segs_;
    st_.pool = &pool;
    st_.out_off = st_.off;
    st_.n_out = st_.n;
    st_.n_rows = st_.n_out_rows = st_.rows = n;
    st_.last = true;
    st_.il = hp.n_layer;  // no sliding window, no recurrent layer
    st_.mtp = true;
    arch.mtp_block(st_, m.layer);
    st_.mtp = false;
    for (const MtpSegment& sg : segs) sg.seq->mtp_kv->append(sg.next);
    // The head's output: its hidden rows after shared_head_norm (the next chained draft's input,
    // as ik_llama.cpp and vLLM chain it) and logits.
    norm_rows(st_, st_.x.data(), m.shared_head_norm ? m.shared_head_norm : model.output_norm, n,
              st_.h.data());
    const size_t nv = static_cast<size_t>(hp.n_vocab);
    const WeightView& head = m.head.data ? m.head : model.output;
    // One session writes its logits in place; several go through the pass's buffer.
    SequenceState& one = *segs[0].seq;
    if (ns == 1) grow(one.mtp_logits, nv * n);
    float* logits = ns == 1 ? one.mtp_logits.data() : st_.logits.data();
    matmul(head, st_.h.data(), hp.n_embd, n, logits, hp.n_vocab, pool, st_.mm);
    for (size_t s = 0; s < ns; ++s) {
        SequenceState& seq = *segs[s].seq;
        const size_t r0 = static_cast<size_t>(st_.off[s]), rows = static_cast<size_t>(st_.n[s]);
        grow(seq.mtp_hidden, d * rows);
        std::memcpy(seq.mtp_hidden.data(), st_.h.data() + d * r0, sizeof(float) * d * rows);
        if (ns > 1) {
            grow(seq.mtp_logits, nv * rows);
            std::memcpy(seq.mtp_logits.data(), st_.logits.data() + nv * r0,
                        sizeof(float) * nv * rows);
        }
        seq.n_mtp = st_.n[s];
    }
    st_.segs = {};
}

}  // namespace specula
