// Architecture "gemma4" (Gemma 4's dense models), as ik_llama.cpp's graph computes it: gemma3's
// block (pre- and post-norms, GeGLU, Q/K norms, the embedding scaled by sqrt(n_embd), NEOX rope)
// with layers of their own shapes, KV shared by the last layers, V = K where a layer has no
// attn_v, per-layer inputs and a per-layer output scale.
//   hparams: gemma4.{context_length, embedding_length, block_count, feed_forward_length (one
//            value, or one per layer: the double-wide FFN of some layers), attention.head_count
//            and head_count_kv (one value or one per layer), attention.key_length /
//            value_length (the full-attention layers' head size) and key_length_swa /
//            value_length_swa (the sliding-window layers'; required), attention.sliding_window
//            (required) and attention.sliding_window_pattern (one flag per layer: 1 slides),
//            attention.shared_kv_layers (default 0), attention.layer_norm_rms_epsilon,
//            rope.dimension_count (default key_length) / dimension_count_swa (default
//            key_length_swa), rope.freq_base / freq_base_swa (default freq_base), rope.scaling.*,
//            embedding_length_per_layer_input (default 0: no per-layer inputs),
//            final_logit_softcapping (default 30)}; the MoE variant (26B-A4B): expert_count,
//            expert_used_count, expert_feed_forward_length.
//            The attention scale is 1 (the Q/K norms set the scale).
//   tensors: token_embd, output_norm, output (optional: tied), rope_freqs (optional: the full
//            layers' frequency factors, proportional rope; the sliding ones rotate without);
//            with per-layer inputs per_layer_token_embd [n_layer * ple, n_vocab],
//            per_layer_model_proj [n_embd -> n_layer * ple], per_layer_proj_norm [ple];
//            per layer blk.N.attn_norm, attn_q, attn_k and attn_k_norm (optional in a layer that
//            shares another's KV), attn_v (optional: V = K), attn_q_norm, attn_output,
//            post_attention_norm, ffn_norm, ffn_{gate,up,down}, post_ffw_norm,
//            layer_output_scale [1] (optional), and with per-layer inputs inp_gate
//            [n_embd -> ple], proj [ple -> n_embd], post_norm; a MoE layer also ffn_gate_inp
//            [n_embd -> n_expert] and its .scale [n_embd], pre_ffw_norm_2, post_ffw_norm_1/_2,
//            ffn_gate_up_exps (per expert [gate | up]), ffn_down_exps and its .scale [n_expert]
//            (optional).
//   block:   h = rms_norm(x) * attn_norm; q = Wq h; k = Wk h, v = Wv h (or k);
//            q, k = per-head rms_norm * attn_{q,k}_norm, v = per-head rms_norm (no weight);
//            rope (NEOX; the layer's head size, rotated dims and base);
//            x += rms_norm(Wo attention(q, K, V)) * post_attention_norm, K and V from the
//            layer's own cache, or for the last shared_kv_layers layers from the cache of the
//            last earlier layer of the same kind;
//            x += rms_norm(down(gelu(gate h) * up h)) * post_ffw_norm, h = rms_norm(x) * ffn_norm
//            (a MoE layer: moe_ffn below);
//            with per-layer inputs x += rms_norm(proj(gelu(inp_gate x) * P_il)) * post_norm, where
//            P = (rms_norm(per_layer_model_proj e) * per_layer_proj_norm + per_layer_token_embd[t]
//            * sqrt(ple)) / sqrt(2) per layer (e the scaled embedding, the norm's eps n_embd x
//            the file's); x *= layer_output_scale; logits = 30 tanh(output(rms_norm(x) *
//            output_norm) / 30).
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "kernels/ops.h"
#include "kernels/quants.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"
#include "model/load/model.h"

namespace specula {

namespace {

// The scratch buffers (st.arch): per-layer inputs, their gate, and the MoE's expert input,
// router input and expert output.
enum Scratch { kPle, kPleGate, kMoeIn, kMoeRouter, kMoeOut };

// The last shared_kv_layers layers read the cache of the last earlier layer of their kind.
void read_shared_kv(const GGUFFile& f, HParams& hp) {
    const std::string key = hp.arch + ".attention.shared_kv_layers";
    const int n_shared = read_int(f, key, 0, 0, hp.n_layer - 1);
    if (n_shared == 0) return;
    const int n_own = hp.n_layer - n_shared;
    hp.kv_src.resize(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il) {
        int src = il;
        if (il >= n_own) {
            src = n_own - 1;
            while (src >= 0 && hp.is_swa(src) != hp.is_swa(il)) --src;
            if (src < 0) {
                fail(f.path(), ": key '", key, "' = ", n_shared, ": layer ", il, " (",
                     hp.is_swa(il) ? "sliding-window" : "full attention",
                     ") has no earlier layer of its kind with a KV cache to share");
            }
        }
        hp.kv_src[size_t(il)] = src;
    }
}

void read_head_sizes(const GGUFFile& f, HParams& hp) {
    const std::string p = hp.arch + ".";
    hp.head_dim_swa = read_int(f, p + "attention.key_length_swa", -1, 1, 1 << 16);
    if (read_int(f, p + "attention.value_length_swa", hp.head_dim_swa, 1, 1 << 16) !=
        hp.head_dim_swa) {
        fail(f.path(), ": ", p, "attention.value_length_swa must equal key_length_swa (",
             hp.head_dim_swa, ")");
    }
    hp.n_rot_swa = read_int(f, p + "rope.dimension_count_swa", hp.head_dim_swa, 2, hp.head_dim_swa);
    if (hp.n_rot_swa % 2 != 0)
        fail(f.path(), ": ", p, "rope.dimension_count_swa = ", hp.n_rot_swa, " must be even");
    hp.rope_freq_base_swa = float(f.get_float_or(p + "rope.freq_base_swa", hp.rope_freq_base));
    if (!std::isfinite(hp.rope_freq_base_swa) || hp.rope_freq_base_swa <= 0) {
        fail(f.path(), ": key '", p, "rope.freq_base_swa' = ", hp.rope_freq_base_swa,
             " must be > 0");
    }
    hp.rope_freq_scale_swa = hp.rope_freq_scale;
}

void read_gemma4(const GGUFFile& f, HParams& hp) {
    read_base_hparams(f, hp, /*per_layer=*/true);
    read_attention_hparams(f, hp, /*per_layer=*/true);
    read_rope_hparams(f, hp);
    read_expert_hparams(f, hp);
    if (hp.n_expert > 0) {  // the MoE variant: experts beside each layer's dense FFN
        read_expert_ff_length(f, hp);
        hp.moe_act = HParams::MoeAct::Gelu;
        hp.moe_routing = HParams::MoeRouting::SoftmaxTopKNorm;
        hp.moe_dense_ffn = true;
    }
    read_sliding_window(f, hp, -1);
    read_swa_flags(f, hp);
    read_head_sizes(f, hp);
    read_shared_kv(f, hp);
    hp.rope_neox = true;
    hp.swa_rope_factors = false;
    hp.ffn_act = HParams::FfnAct::GeluTanh;
    hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
    hp.attn_scale = 1.0f;
    const std::string cap = hp.arch + ".final_logit_softcapping";
    const double softcap = f.get_float_or(cap, 30.0);
    if (!std::isfinite(softcap) || softcap <= 0) fail(f.path(), ": key '", cap, "' must be > 0");
    hp.final_softcap = float(softcap);
    hp.n_embd_per_layer = read_int(f, hp.arch + ".embedding_length_per_layer_input", 0, 0, 1 << 16);
}

// The MoE variant's tensors (a layer without a router is dense).
void bind_moe(TensorBinder& b, const HParams& hp, const std::string& pre, LayerWeights& l) {
    const int64_t d = hp.n_embd, ne = hp.n_expert, ff = hp.n_ff_expert;
    l.ffn_gate_inp = b.floats(pre + "ffn_gate_inp.weight", {d, ne}, Need::Optional);
    if (!l.ffn_gate_inp) return;
    l.ffn_gate_inp_s = b.vector(pre + "ffn_gate_inp.scale", d);
    l.ffn_pre_norm_2 = b.vector(pre + "pre_ffw_norm_2.weight", d);
    l.ffn_post_norm_1 = b.vector(pre + "post_ffw_norm_1.weight", d);
    l.ffn_post_norm_2 = b.vector(pre + "post_ffw_norm_2.weight", d);
    l.ffn_gate_up_exps = b.matrix(pre + "ffn_gate_up_exps.weight", {d, 2 * ff, ne});
    l.ffn_down_exps = b.matrix(pre + "ffn_down_exps.weight", {ff, d, ne});
    l.ffn_down_exps_s = b.vector(pre + "ffn_down_exps.scale", ne, Need::Optional);
}

void bind_layer(TensorBinder& b, const HParams& hp, int il, LayerWeights& l) {
    const std::string pre = layer_prefix(il);
    const int64_t d = hp.n_embd, dq = hp.layer_n_embd_q(il), dkv = hp.layer_n_embd_kv(il);
    const int64_t hd = hp.layer_head_dim(il), ff = hp.layer_n_ff(il);
    const Need kv_need = hp.own_kv(il) ? Need::Required : Need::Optional;
    l.attn_norm = b.vector(pre + "attn_norm.weight", d);
    l.wq = b.matrix(pre + "attn_q.weight", {d, dq});
    l.wo = b.matrix(pre + "attn_output.weight", {dq, d});
    l.q_norm = b.vector(pre + "attn_q_norm.weight", hd);
    if (hp.own_kv(il)) {  // a layer that shares another's KV ignores its own K/V weights
        l.wk = b.matrix(pre + "attn_k.weight", {d, dkv}, kv_need);
        l.wv = b.matrix(pre + "attn_v.weight", {d, dkv}, Need::Optional);
        l.k_norm = b.vector(pre + "attn_k_norm.weight", hd, kv_need);
    }
    l.attn_post_norm = b.vector(pre + "post_attention_norm.weight", d);
    l.ffn_norm = b.vector(pre + "ffn_norm.weight", d);
    l.ffn_gate = b.matrix(pre + "ffn_gate.weight", {d, ff});
    l.ffn_up = b.matrix(pre + "ffn_up.weight", {d, ff});
    l.ffn_down = b.matrix(pre + "ffn_down.weight", {ff, d});
    l.ffn_post_norm = b.vector(pre + "post_ffw_norm.weight", d);
    l.out_scale = b.vector(pre + "layer_output_scale.weight", 1, Need::Optional);
    if (hp.n_expert > 0) bind_moe(b, hp, pre, l);
    if (const int64_t ple = hp.n_embd_per_layer; ple > 0) {
        l.ple_gate = b.matrix(pre + "inp_gate.weight", {d, ple});
        l.ple_proj = b.matrix(pre + "proj.weight", {ple, d});
        l.ple_post_norm = b.vector(pre + "post_norm.weight", d);
    }
}

void bind_gemma4(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_io(b, hp, w);
    if (const int64_t ple = hp.n_embd_per_layer; ple > 0) {
        const int64_t all = ple * hp.n_layer;
        w.tok_embd_per_layer = b.matrix("per_layer_token_embd.weight", {all, hp.n_vocab});
        w.per_layer_model_proj = b.matrix("per_layer_model_proj.weight", {hp.n_embd, all});
        w.per_layer_proj_norm = b.vector("per_layer_proj_norm.weight", ple);
    }
    w.layers.resize(hp.n_layer);
    int n_moe = 0;
    for (int il = 0; il < hp.n_layer; ++il) {
        LayerWeights& l = w.layers[il];
        bind_layer(b, hp, il, l);
        // The router reads rms_norm(x) * scale / sqrt(n_embd): the factor folded into a copy of
        // the scale once, as ik_llama.cpp does at load.
        if (l.ffn_gate_inp_s) {
            const float f = 1.0f / std::sqrt(float(hp.n_embd));
            std::vector<float>& s =
                w.owned.emplace_back(l.ffn_gate_inp_s, l.ffn_gate_inp_s + hp.n_embd);
            for (float& v : s) v *= f;
            l.ffn_gate_inp_s = s.data();
        }
        n_moe += l.ffn_gate_inp != nullptr;
    }
    if (hp.n_expert > 0 && n_moe == 0) {
        fail(b.path(), ": key '", hp.arch, ".expert_count' = ", hp.n_expert,
             " but no layer has experts (blk.N.ffn_gate_inp.weight)");
    }
}

// Per-head RMS norm without a weight (ggml_rms_norm): V of every row.
void v_norm(PassState& st) {
    const HParams& hp = st.hp;
    const int hd = hp.layer_head_dim(st.il), nkv = hp.layer_n_head_kv(st.il);
    float* v = st.v.data();
    over_items(*st.pool, st.n_rows, nkv * hd, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            for (int h = 0; h < nkv; ++h) {
                float* x = v + (t * nkv + h) * hd;
                double sum = 0.0;
                for (int i = 0; i < hd; ++i) sum += double(x[i] * x[i]);
                const float scale = 1.0f / std::sqrt(float(sum / hd) + hp.rms_eps);
                for (int i = 0; i < hd; ++i) x[i] *= scale;
            }
        }
    });
}

// The per-layer inputs of every row of the pass (st.arch[0]: n_layer x ple per row), from the
// scaled embeddings in x before layer 0.
void per_layer_inputs(PassState& st) {
    const HParams& hp = st.hp;
    const Model& m = st.model;
    const int ple = hp.n_embd_per_layer, all = ple * hp.n_layer;
    float* P = st.arch[kPle].data();
    matmul(m.per_layer_model_proj, st.x.data(), hp.n_embd, st.n_rows, P, all, *st.pool, st.mm);
    const float e_scale = std::sqrt(float(ple)), mix = 1.0f / std::sqrt(2.0f);
    const float eps = float(hp.n_embd) * hp.rms_eps;
    std::vector<float> e(static_cast<size_t>(all));
    for (size_t s = 0; s < st.segs.size(); ++s) {
        for (int t = 0; t < st.n[s]; ++t) {
            float* p = P + size_t(st.off[s] + t) * all;
            const WeightView& te = m.tok_embd_per_layer;
            dequantize_row(te.type, te.row(st.segs[s].tokens[size_t(t)]), e.data(), te.cols);
            for (int j = 0; j < hp.n_layer; ++j) {
                float* pj = p + j * ple;
                rms_norm(pj, m.per_layer_proj_norm, ple, eps, pj);
                for (int i = 0; i < ple; ++i)
                    pj[i] = (pj[i] + e[size_t(j * ple + i)] * e_scale) * mix;
            }
        }
    }
}

// x += rms_norm(proj(gelu(inp_gate x) * P_il)) * post_norm over the layer's rows (in the last
// layer each segment's output rows, which its attention moved to the front).
void per_layer_output(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int ple = hp.n_embd_per_layer, all = ple * hp.n_layer, nr = st.rows;
    float* g = st.arch[kPleGate].data();
    matmul(l.ple_gate, st.x.data(), hp.n_embd, nr, g, ple, *st.pool, st.mm);
    for (size_t s = 0; s < st.segs.size(); ++s) {
        const AttendedRows r = attended_rows(st, s);
        for (int i = 0; i < r.n; ++i) {
            const float* p = st.arch[kPle].data() + size_t(r.src + i) * all + size_t(st.il) * ple;
            gelu_mul(g + size_t(r.dst + i) * ple, p, ple);
        }
    }
    matmul(l.ple_proj, g, ple, nr, st.tmp.data(), hp.n_embd, *st.pool, st.mm);
    norm_rows(st, st.tmp.data(), l.ple_post_norm, nr, st.tmp.data());
    add_into_all(*st.pool, st.x.data(), st.tmp.data(), int64_t(nr) * hp.n_embd);
}

// The MoE layer's FFN: x += rms_norm(rms_norm(mlp) * post_ffw_norm_1 + rms_norm(moe) *
// post_ffw_norm_2) * post_ffw_norm, with mlp the dense FFN of rms_norm(x) * ffn_norm and moe the
// experts over rms_norm(x) * pre_ffw_norm_2, routed by rms_norm(x) * ffn_gate_inp.scale /
// sqrt(n_embd) (the factor folded in at bind).
void moe_ffn(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int nr = st.rows;
    float* x = st.x.data();
    float* in = st.arch[kMoeIn].data();
    float* router = st.arch[kMoeRouter].data();
    float* out = st.arch[kMoeOut].data();
    norm_rows(st, x, l.ffn_norm, nr, st.h.data());
    dense_ffn(st, l, nr, st.tmp.data());
    norm_rows(st, st.tmp.data(), l.ffn_post_norm_1, nr, st.tmp.data());
    norm_rows(st, x, l.ffn_pre_norm_2, nr, in);
    norm_rows(st, x, l.ffn_gate_inp_s, nr, router);
    st.moe.forward(l, hp, in, nr, out, *st.pool, st.mm, router);
    norm_rows(st, out, l.ffn_post_norm_2, nr, out);
    add_into_all(*st.pool, st.tmp.data(), out, int64_t(nr) * hp.n_embd);
    norm_rows(st, st.tmp.data(), l.ffn_post_norm, nr, st.tmp.data());
    add_into_all(*st.pool, x, st.tmp.data(), int64_t(nr) * hp.n_embd);
}

void block(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int il = st.il;
    if (il == 0 && hp.n_embd_per_layer > 0) per_layer_inputs(st);
    attention_input(st, l);
    const bool own = hp.own_kv(il);
    if (own && !l.wv.data) {  // V = K (before K's norm and rope)
        const size_t n = size_t(st.n_rows) * size_t(hp.layer_n_embd_kv(il));
        std::memcpy(st.v.data(), st.k.data(), sizeof(float) * n);
    }
    qk_norm(st, l);
    if (own) v_norm(st);
    rope_and_cache(st);
    attention_output(st, l);
    if (l.ffn_gate_inp)
        moe_ffn(st, l);
    else
        ffn(st, l);
    if (hp.n_embd_per_layer > 0) per_layer_output(st, l);
    if (l.out_scale) {
        const float s = l.out_scale[0];
        float* x = st.x.data();
        const int64_t n = int64_t(st.rows) * hp.n_embd;
        for (int64_t i = 0; i < n; ++i) x[i] *= s;
    }
}

std::vector<int64_t> scratch(const HParams& hp) {
    const int64_t ple = hp.n_embd_per_layer, moe = hp.n_expert > 0 ? hp.n_embd : 0;
    return {ple * hp.n_layer, ple, moe, moe, moe};
}

}  // namespace

const ArchSpec kGemma4Arch = {.name = "gemma4",
                              .read = read_gemma4,
                              .bind = bind_gemma4,
                              .block = block,
                              .device_block = false,
                              .scratch = scratch};

}  // namespace specula
