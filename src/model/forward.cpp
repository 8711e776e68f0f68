// ForwardPass: the forward pass over a batch of tokens with a KV cache, following llama.cpp's
// graphs op by op:
//   x = token_embd[id]
//   per layer: the architecture's block (model/load/arch.h) over the pass state, e.g. llama's
//              h = rms_norm(x) * attn_norm; q,k,v = W{q,k,v} h (+ bias); rope(q, k);
//              x += Wo attention(q, K, V) (+ bo)
//              h = rms_norm(x) * ffn_norm; x += down(silu(gate h) * up h)   (or the MoE)
//   logits = output (rms_norm(x) * output_norm)
// A pass holds rows of one or more sequences (segments). Matmuls take every row of the pass (each
// weight streamed once); attention runs per segment over that segment's own cache; everything
// else is per row in a fixed order, which makes a row's logits independent of the pass it shares.
// Buffers grow to the largest pass seen and are reused, so steady-state decoding allocates
// nothing.
#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "kernels/quants.h"
#include "model/forward_pass.h"
#include "model/load/arch.h"

namespace specula {

ForwardPass::ForwardPass(const Model& model) : st_(model) {
    const ArchSpec& arch = model.arch();
    if (arch.scratch) arch_widths_ = arch.scratch(st_.hp);
    st_.arch.resize(arch_widths_.size());
}

// As ik_llama.cpp picks them: rope_freqs when the file has them, else LongRoPE's long factors
// for a context beyond the training one and its short ones otherwise (none when absent).
const float* ForwardPass::rope_factors(int n_ctx) const {
    const Model& m = st_.model;
    if (!m.rope_freq_factors.empty()) return m.rope_freq_factors.data();
    const auto& f = n_ctx > st_.hp.n_ctx_orig ? m.rope_factors_long : m.rope_factors_short;
    return f.empty() ? nullptr : f.data();
}

template <class F>
void ForwardPass::each_buffer(int ntok, int logit_rows, F&& f) {
    const HParams& hp = st_.hp;
    const size_t n = static_cast<size_t>(ntok);
    PassState& s = st_;
    f(s.x, n * hp.n_embd);
    f(s.h, n * hp.n_embd);
    f(s.tmp, n * hp.n_embd);
    f(s.q, n * hp.max_n_embd_q());
    f(s.k, n * hp.max_n_embd_kv());
    f(s.v, n * hp.max_n_embd_kv());
    f(s.att, n * hp.max_n_embd_q());
    if (hp.n_expert == 0 || hp.moe_dense_ffn) {  // the dense FFN's (the MoE keeps its own)
        f(s.ff_g, n * hp.max_n_ff());
        f(s.ff_u, n * hp.max_n_ff());
    }
    f(s.rope_cs, n * hp.max_n_rot());
    if (s.swa_rope) f(s.rope_cs_swa, n * hp.max_n_rot());
    f(s.logits, size_t(logit_rows) * hp.n_vocab);
    for (size_t i = 0; i < arch_widths_.size(); ++i) f(s.arch[i], n * arch_widths_[i]);
    if (hp.n_recurrent() > 0) {
        const size_t nv = size_t(hp.ssm_dt_rank);
        f(s.dn_x, n * hp.ssm_conv_dim());
        f(s.dn_scratch, n * hp.ssm_conv_dim());
        f(s.dn_z, n * hp.ssm_value_dim());
        f(s.dn_o, n * hp.ssm_value_dim());
        f(s.dn_b, n * nv);
        f(s.dn_a, n * nv);
        f(s.dn_g, n * nv);
    }
    if (hp.n_ff_shexp > 0) {
        f(s.sh_g, n * hp.n_ff_shexp);
        f(s.sh_u, n * hp.n_ff_shexp);
        f(s.sh_d, n * hp.n_embd);
    }
}

void ForwardPass::reserve(int ntok, int logit_rows, int max_ctx, int n_threads) {
    each_buffer(ntok, logit_rows, [](std::vector<float>& v, size_t n) { grow(v, n); });
    grow(st_.scores, attention_scratch_floats(st_.att_shape, max_ctx, n_threads));
    if (st_.hp.n_expert > 0) st_.moe.reserve(st_.hp, ntok);
}

double ForwardPass::buffer_bytes(int ntok, int logit_rows) {
    double b = 0;
    each_buffer(ntok, logit_rows, [&](std::vector<float>&, size_t n) { b += sizeof(float) * n; });
    if (st_.hp.n_expert > 0) b += MoeFFN::bytes(st_.hp, ntok);
    if (st_.model.has_mtp()) b += sizeof(float) * 2.0 * st_.hp.n_embd * ntok;  // mtp_cat_
    return b;
}

double ForwardPass::allocated_bytes() const {
    double b = 0;
    const_cast<ForwardPass*>(this)->each_buffer(
        0, 0, [&](std::vector<float>& v, size_t) { b += sizeof(float) * v.capacity(); });
    return b + st_.moe.allocated_bytes() + sizeof(float) * double(mtp_cat_.capacity());
}

void ForwardPass::lay_out(std::span<const PassSegment> segs) {
    PassState& s = st_;
    const size_t ns = segs.size();
    s.off.resize(ns);
    s.n.resize(ns);
    s.out_off.resize(ns);
    s.n_out.resize(ns);
    s.n_rows = s.n_out_rows = 0;
    for (size_t i = 0; i < ns; ++i) {
        s.off[i] = s.n_rows;
        s.n[i] = static_cast<int>(segs[i].tokens.size());
        s.out_off[i] = s.n_out_rows;
        s.n_out[i] = segs[i].all_logits ? s.n[i] : std::min(s.n[i], 1);
        s.n_rows += s.n[i];
        s.n_out_rows += s.n_out[i];
        segs[i].seq->n_logits = 0;
    }
}

void ForwardPass::embed(std::span<const PassSegment> segs) {
    const HParams& hp = st_.hp;
    const WeightView& e = st_.model.tok_embd;
    for (size_t s = 0; s < segs.size(); ++s) {
        const int pos0 = segs[s].seq->kv.n_past();
        RopeParams rope = st_.rope;
        rope.freq_factors = rope_factors(segs[s].seq->kv.n_ctx());
        RopeParams rope_swa = st_.rope_swa;
        if (hp.swa_rope_factors) rope_swa.freq_factors = rope.freq_factors;
        for (int t = 0; t < st_.n[s]; ++t) {
            const size_t row = static_cast<size_t>(st_.off[s] + t);
            float* xr = st_.x.data() + row * hp.n_embd;
            dequantize_row(e.type, e.row(segs[s].tokens[t]), xr, e.cols);
            if (hp.embd_scale > 0)
                for (int i = 0; i < hp.n_embd; ++i) xr[i] *= hp.embd_scale;
            rope_angles(rope, pos0 + t, st_.rope_cs.data() + row * hp.max_n_rot());
            if (st_.swa_rope)
                rope_angles(rope_swa, pos0 + t, st_.rope_cs_swa.data() + row * hp.max_n_rot());
        }
    }
}

// Layers before the last carry every row: a session that captures layer il gets all its rows of
// this pass, in the column of il among its capture_layers.
void ForwardPass::capture(int il) {
    const size_t d = static_cast<size_t>(st_.hp.n_embd);
    for (size_t s = 0; s < st_.segs.size(); ++s) {
        SequenceState& seq = *st_.segs[s].seq;
        const auto& layers = seq.capture_layers;
        const auto it = std::find(layers.begin(), layers.end(), il);
        if (it == layers.end()) continue;
        const size_t width = layers.size() * d, col = size_t(it - layers.begin()) * d;
        grow(seq.captured, size_t(st_.n[s]) * width);
        for (int t = 0; t < st_.n[s]; ++t) {
            std::memcpy(seq.captured.data() + t * width + col, st_.x.data() + (st_.off[s] + t) * d,
                        sizeof(float) * d);
        }
        seq.n_captured = st_.n[s];
    }
}

void ForwardPass::run(std::span<const PassSegment> segs, ThreadPool& pool) {
    const size_t ns = segs.size();
    lay_out(segs);
    if (st_.n_rows == 0) return;
    int max_ctx = 1;
    for (const PassSegment& sg : segs) max_ctx = std::max(max_ctx, sg.seq->kv.n_ctx());
    // One segment's logits go straight to its session: the pass's own buffer holds only the
    // output rows of a pass over several.
    reserve(st_.n_rows, ns > 1 ? st_.n_out_rows : 0, max_ctx, pool.size());
    embed(segs);
    // A session with a device offload runs alone (BatchEvaluator evaluates such sessions one by
    // one): the device runs the first layers (and maybe the head) on x.
    int il0 = 0;
    if (LayerOffload* off = ns == 1 ? segs[0].seq->offload.get() : nullptr) {
        SequenceState& seq = *segs[0].seq;
        il0 = off->n_layers();
        const float* cs_swa = st_.swa_rope ? st_.rope_cs_swa.data() : nullptr;
        const int n_out = st_.n_out[0];
        if (off->has_output()) {
            grow(seq.logits, static_cast<size_t>(n_out) * st_.hp.n_vocab);
            off->forward(st_.x.data(), st_.rope_cs.data(), cs_swa, st_.n_rows, seq.kv.n_past(),
                         n_out, seq.logits.data(), pool);
            seq.n_logits = n_out;
            seq.kv.append(segs[0].tokens);
            return;
        }
        off->forward(st_.x.data(), st_.rope_cs.data(), cs_swa, st_.n_rows, seq.kv.n_past(), n_out,
                     st_.logits.data(), pool);
    }
    bool capturing = false;
    for (const PassSegment& sg : segs) {
        SequenceState& seq = *sg.seq;
        if (!seq.rec.empty()) seq.rec.begin_pass(seq.kv.n_past(), int(sg.tokens.size()));
        capturing = capturing || !seq.capture_layers.empty();
    }
    // Only the rows whose logits are wanted go through the last layer's attention output and
    // FFN, the final norm and the output matmul (earlier layers feed every token's K and V).
    st_.segs = segs;
    st_.pool = &pool;
    const ArchSpec& arch = st_.model.arch();
    const HParams& hp = st_.hp;
    for (st_.il = il0; st_.il < hp.n_layer; ++st_.il) {
        st_.last = st_.il == hp.n_layer - 1;
        st_.rows = st_.last ? st_.n_out_rows : st_.n_rows;
        arch.block(st_, st_.model.layers[st_.il]);
        if (capturing) capture(st_.il);
    }
    output(segs, pool);
    st_.segs = {};
}

void ForwardPass::output(std::span<const PassSegment> segs, ThreadPool& pool) {
    const HParams& hp = st_.hp;
    const Model& model = st_.model;
    const size_t ns = segs.size();
    norm_rows(st_, st_.x.data(), model.output_norm, st_.n_out_rows, st_.h.data());
    // The MTP head's input (and a Medusa drafter's, SessionParams::keep_hidden): the final hidden
    // rows after the output norm (the output matmul's input, as ik_llama.cpp and vLLM feed it),
    // one per logits row.
    {
        const size_t d = static_cast<size_t>(hp.n_embd);
        for (size_t s = 0; s < ns; ++s) {
            SequenceState& seq = *segs[s].seq;
            if (!seq.keep_hidden) continue;
            const size_t row0 = static_cast<size_t>(segs[s].logits_row);
            grow(seq.hidden, (row0 + st_.n_out[s]) * d);
            std::memcpy(seq.hidden.data() + row0 * d, st_.h.data() + st_.out_off[s] * d,
                        sizeof(float) * st_.n_out[s] * d);
        }
    }
    const size_t nv = static_cast<size_t>(hp.n_vocab);
    // One segment (a plain or verify step): the output matmul writes straight into its logits
    // (a 9-row pass over a 128k vocabulary would otherwise copy 4.6 MB); several: into the
    // pass's buffer, then each segment's rows to its session.
    float* out = st_.logits.data();
    if (ns == 1) {
        SequenceState& seq = *segs[0].seq;
        const size_t row0 = static_cast<size_t>(segs[0].logits_row);
        grow(seq.logits, (row0 + st_.n_out[0]) * nv);
        out = seq.logits.data() + row0 * nv;
    }
    matmul(model.output, st_.h.data(), hp.n_embd, st_.n_out_rows, out, hp.n_vocab, pool, st_.mm);
    if (hp.final_softcap > 0) {
        over_items(pool, st_.n_out_rows, hp.n_vocab, [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; ++t) softcap(out + t * nv, hp.n_vocab, hp.final_softcap);
        });
    }
    for (size_t s = 0; s < ns; ++s) {
        SequenceState& seq = *segs[s].seq;
        const size_t row0 = static_cast<size_t>(segs[s].logits_row);
        if (ns > 1) {
            grow(seq.logits, (row0 + st_.n_out[s]) * nv);
            std::memcpy(seq.logits.data() + row0 * nv, st_.logits.data() + st_.out_off[s] * nv,
                        sizeof(float) * st_.n_out[s] * nv);
        }
        seq.n_logits = int(row0) + st_.n_out[s];
        seq.kv.append(segs[s].tokens);
    }
}

}  // namespace specula
