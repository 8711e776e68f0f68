// Architecture "deepseek2" (DeepSeek V2 / V3 and their distills, GLM-4.7-Flash, Kimi): Multi-head
// Latent Attention over a cache of latent rows, and a mixture of experts with shared experts, as
// ik_llama.cpp's graph computes them.
//   hparams: deepseek2.{context_length, embedding_length, block_count, feed_forward_length (the
//            leading dense layers' width), attention.head_count, attention.head_count_kv (must
//            equal head_count: the files whose attn_kv_b is split into attn_k_b / attn_v_b are
//            refused), attention.key_length (nope + rope dims of a query head) and value_length
//            (a value head), attention.kv_lora_rank, attention.q_lora_rank (default 0: a plain
//            attn_q), attention.layer_norm_rms_epsilon, rope.dimension_count (the decoupled rope
//            dims, < key_length), rope.freq_base, rope.scaling.* (YaRN with
//            rope.scaling.yarn_log_multiplier), expert_count, expert_used_count,
//            expert_feed_forward_length, expert_shared_count (default 0),
//            leading_dense_block_count (default 0), expert_weights_scale (default 1),
//            expert_weights_norm (default false), expert_gating_func (1 softmax, 2 sigmoid;
//            default as ik_llama.cpp: sigmoid for 47 or 48 layers (GLM-4.7-Flash), else softmax),
//            expert_group_count / expert_group_used_count (default 0: no groups)}.
//   tensors: token_embd, output_norm, output; per layer attn_norm, attn_q_a [n_embd -> q_lora],
//            attn_q_a_norm, attn_q_b [q_lora -> n_head * key_length] (or attn_q), attn_kv_a_mqa
//            [n_embd -> kv_lora + rope], attn_kv_a_norm [kv_lora], attn_kv_b [kv_lora -> n_head *
//            (nope + value_length)], attn_output, ffn_norm; the leading dense layers ffn_{gate,up,
//            down}, the others ffn_gate_inp, exp_probs_b (optional), ffn_{gate,up,down}_exps and,
//            with shared experts, ffn_{gate,up,down}_shexp (expert_shared_count x the expert
//            width).
//   block:   h = rms_norm(x) * attn_norm; q = Wq_b(rms_norm(Wq_a h) * q_a_norm) (or Wq h), per
//            head [q_nope | q_pe]; [c | k_pe] = Wkv_a h, c = rms_norm(c) * kv_a_norm;
//            the cache row (one KV head of kv_lora + rope values) is [rope(k_pe) | c], kept once
//            as K and read as V too (HParams::kv_v_is_k: -ctv does not apply), and query
//            head i is [rope(q_pe_i) | K_b,i^T q_nope_i] (K_b,i, V_b,i: head i's rows of Wkv_b),
//            so q.k over the row equals the expanded q_i . k_i; the attention's output o_i over
//            the rows' c part gives head i's value V_b,i o_i; x += Wo [values];
//            x += FFN(rms_norm(x) * ffn_norm): SwiGLU in the leading dense layers, else the MoE
//            (model/blocks/moe.h: softmax or sigmoid probabilities, the top k by probability +
//            exp_probs_b within the best groups, weights optionally renormalised, times
//            expert_weights_scale) plus the shared experts' SwiGLU.
//   mtp:     the last nextn layer (nextn_predict_layers > 0, or a sidecar) is the MTP head
//            (--spec-type mtp: model/forward_mtp.cpp), the block above over the head's own cache
//            of latent rows; earlier nextn layers are not run.
//   K_b,i^T (made at load) is rounded to Q8_0 where attn_kv_b is quantized, as ik_llama.cpp's
//   is; both per-head stacks are packed for the GEMM kernels (model/load/pack.cpp).
//   The attention scale is mscale^2 / sqrt(key_length), mscale = attn_factor (1 +
//   yarn_log_multiplier ln(1 / freq_scale)); rope (normal, not NEOX) magnitude 1 / (1 + 0.1
//   ln(1 / freq_scale)), as ik_llama.cpp.
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "kernels/layout/blocks.h"
#include "kernels/ops.h"
#include "kernels/quants.h"
#include "kernels/repack.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"
#include "model/load/model.h"

namespace specula {

namespace {

enum Scratch { kQ, kKvA, kQA, kVOut, kFfG, kFfU };

void read_attention(const GGUFFile& f, HParams& hp) {
    const std::string p = hp.arch + ".";
    hp.n_head = read_int(f, p + "attention.head_count", -1, 1, 4096);
    if (read_int(f, p + "attention.head_count_kv", hp.n_head, 1, 4096) != hp.n_head) {
        fail(f.path(), ": key '", p, "attention.head_count_kv' must equal attention.head_count (",
             hp.n_head, "): files with attn_k_b / attn_v_b instead of attn_kv_b are not supported");
    }
    hp.mla_head_k = read_int(f, p + "attention.key_length", -1, 2, 1 << 14);
    hp.mla_head_v = read_int(f, p + "attention.value_length", -1, 1, 1 << 14);
    hp.mla_kv_lora_rank = read_int(f, p + "attention.kv_lora_rank", -1, 1, 1 << 16);
    hp.mla_q_lora_rank = read_int(f, p + "attention.q_lora_rank", 0, 0, 1 << 16);
    hp.head_dim = hp.mla_head_k;  // what read_rope_hparams bounds the rope dims by
    read_rope_hparams(f, hp);
    if (hp.n_rot == 0 || hp.n_rot >= hp.mla_head_k) {
        fail(f.path(), ": key '", p, "rope.dimension_count' = ", hp.n_rot,
             " must be in [2, attention.key_length = ", hp.mla_head_k, ")");
    }
    const float log_mul = float(f.get_float_or(p + "rope.scaling.yarn_log_multiplier", 0.0));
    const float mscale =
        hp.rope_attn_factor * (1.0f + log_mul * std::log(1.0f / hp.rope_freq_scale));
    hp.attn_scale = mscale * mscale / std::sqrt(float(hp.mla_head_k));
    hp.rope_attn_factor = 1.0f / (1.0f + 0.1f * std::log(1.0f / hp.rope_freq_scale));
    // The cache: one KV head of the latent and the rope dims per position.
    hp.head_dim = hp.mla_kv_lora_rank + hp.n_rot;
    hp.n_head_kv = 1;
    hp.kv_v_is_k = true;  // the values are the row's latent part: the cache keeps the row once
    hp.rope_neox = false;
}

void read_experts(const GGUFFile& f, HParams& hp) {
    const std::string p = hp.arch + ".";
    read_expert_hparams(f, hp);
    hp.n_layer_dense_lead = read_int(f, p + "leading_dense_block_count", 0, 0, hp.n_layer);
    if (hp.n_expert == 0 && hp.n_layer_dense_lead < hp.n_layer)
        fail(f.path(), ": key '", p, "expert_count' is missing or 0");
    hp.n_ff_expert = read_int(f, p + "expert_feed_forward_length", -1, 1, 1 << 20);
    hp.n_ff_shexp = hp.n_ff_expert * read_int(f, p + "expert_shared_count", 0, 0, 64);
    const double scale = f.get_float_or(p + "expert_weights_scale", 1.0);
    if (!std::isfinite(scale) || scale <= 0)
        fail(f.path(), ": key '", p, "expert_weights_scale' = ", scale, " must be > 0");
    hp.moe_w_scale = float(scale);
    hp.moe_norm_w = f.get_bool_or(p + "expert_weights_norm", false);
    const int def_gating = hp.n_layer == 47 || hp.n_layer == 48 ? 2 : 1;
    hp.moe_sigmoid = read_int(f, p + "expert_gating_func", def_gating, 1, 2) == 2;
    const std::string gkey = p + "expert_group_count";
    hp.n_expert_groups = read_int(f, gkey, 0, 0, 64);
    if (hp.n_expert_groups > 1) {
        if (hp.n_expert % hp.n_expert_groups != 0) {
            fail(f.path(), ": key '", gkey, "' = ", hp.n_expert_groups,
                 " does not divide expert_count (", hp.n_expert, ")");
        }
        const std::string ukey = p + "expert_group_used_count";
        hp.n_group_used = read_int(f, ukey, -1, 1, hp.n_expert_groups);
        if (hp.n_group_used * (hp.n_expert / hp.n_expert_groups) < hp.n_expert_used) {
            fail(f.path(), ": key '", ukey, "' = ", hp.n_group_used,
                 ": its groups hold fewer than ", "expert_used_count (", hp.n_expert_used,
                 ") experts");
        }
    }
}

void read_deepseek2(const GGUFFile& f, HParams& hp) {
    read_base_hparams(f, hp);
    read_attention(f, hp);
    read_experts(f, hp);
    hp.n_nextn = read_int(f, hp.arch + ".nextn_predict_layers", 0, 0, hp.n_layer - 1);
    hp.n_layer -= hp.n_nextn;  // the nextn (MTP) layers are not run
    hp.n_layer_dense_lead = std::min(hp.n_layer_dense_lead, hp.n_layer);
}

// Storage in w.owned for `bytes` bytes of a matrix made at load (float storage: 4-byte aligned
// and more, as the allocator aligns).
uint8_t* owned_bytes(ModelWeights& w, size_t bytes) {
    return reinterpret_cast<uint8_t*>(w.owned.emplace_back((bytes + 3) / 4).data());
}

// Each head's K rows of Wkv_b (nope x kv_lora) transposed into kv_lora x nope, stacked head after
// head: the query absorption is one matmul per head (q_lat = K_b,h^T q_nope). Rounded to Q8_0 by
// llama.cpp's CPU rounding where Wkv_b is quantized and nope is whole blocks (as ik_llama.cpp
// requantizes them), else kept as F32.
WeightView transpose_k_b(const HParams& hp, const WeightView& kvb, ModelWeights& w) {
    const int nh = hp.n_head, r = hp.mla_kv_lora_rank, nope = hp.mla_head_k - hp.n_rot;
    const int per_head = nope + hp.mla_head_v;
    const bool floats =
        kvb.type == GGMLType::F32 || kvb.type == GGMLType::F16 || kvb.type == GGMLType::BF16;
    const bool q8 = !floats && nope % QK8_0 == 0;
    const GGMLType type = q8 ? GGMLType::Q8_0 : GGMLType::F32;
    WeightView t{type, int64_t(nh) * r, nope, nullptr};
    uint8_t* dst = owned_bytes(w, size_t(t.rows) * t.row_bytes());
    t.data = dst;
    std::vector<float> rows(size_t(nope) * r), line(static_cast<size_t>(nope));
    for (int h = 0; h < nh; ++h) {
        for (int i = 0; i < nope; ++i)
            dequantize_row(kvb.type, kvb.row(int64_t(h) * per_head + i), &rows[size_t(i) * r], r);
        for (int c = 0; c < r; ++c) {
            for (int i = 0; i < nope; ++i) line[size_t(i)] = rows[size_t(i) * r + size_t(c)];
            uint8_t* out = dst + (size_t(h) * r + size_t(c)) * t.row_bytes();
            if (q8)
                quantize_row_ggml_cpu(GGMLType::Q8_0, line.data(), out, nope);
            else
                std::memcpy(out, line.data(), sizeof(float) * size_t(nope));
        }
    }
    return t;
}

// Each head's V rows of Wkv_b (head_v x kv_lora), stacked head after head, in Wkv_b's type.
WeightView gather_v_b(const HParams& hp, const WeightView& kvb, ModelWeights& w) {
    const int nh = hp.n_head, nope = hp.mla_head_k - hp.n_rot, hv = hp.mla_head_v;
    WeightView v{kvb.type, int64_t(nh) * hv, kvb.cols, nullptr};
    const size_t rb = kvb.row_bytes();
    uint8_t* dst = owned_bytes(w, size_t(v.rows) * rb);
    v.data = dst;
    for (int h = 0; h < nh; ++h)
        std::memcpy(dst + size_t(h) * hv * rb, kvb.row(int64_t(h) * (nope + hv) + nope), hv * rb);
    return v;
}

void bind_layer(TensorBinder& b, const HParams& hp, int il, LayerWeights& l, ModelWeights& w) {
    const std::string pre = layer_prefix(il);
    const int64_t d = hp.n_embd, nh = hp.n_head, r = hp.mla_kv_lora_rank;
    const int64_t nope = hp.mla_head_k - hp.n_rot, qdim = nh * hp.mla_head_k;
    l.attn_norm = b.vector(pre + "attn_norm.weight", d);
    if (const int64_t qr = hp.mla_q_lora_rank; qr > 0) {
        l.wq_a = b.matrix(pre + "attn_q_a.weight", {d, qr});
        l.q_a_norm = b.vector(pre + "attn_q_a_norm.weight", qr);
        l.wq_b = b.matrix(pre + "attn_q_b.weight", {qr, qdim});
    } else {
        l.wq = b.matrix(pre + "attn_q.weight", {d, qdim});
    }
    l.wkv_a_mqa = b.matrix(pre + "attn_kv_a_mqa.weight", {d, r + hp.n_rot});
    l.kv_a_norm = b.vector(pre + "attn_kv_a_norm.weight", r);
    l.wkv_b = b.matrix(pre + "attn_kv_b.weight", {r, nh * (nope + hp.mla_head_v)});
    l.wk_b_t = transpose_k_b(hp, l.wkv_b, w);
    l.wv_b = gather_v_b(hp, l.wkv_b, w);
    l.wo = b.matrix(pre + "attn_output.weight", {nh * hp.mla_head_v, d});
    l.ffn_norm = b.vector(pre + "ffn_norm.weight", d);
    if (il < hp.n_layer_dense_lead) {
        l.ffn_gate = b.matrix(pre + "ffn_gate.weight", {d, hp.n_ff});
        l.ffn_up = b.matrix(pre + "ffn_up.weight", {d, hp.n_ff});
        l.ffn_down = b.matrix(pre + "ffn_down.weight", {hp.n_ff, d});
        return;
    }
    const int64_t ne = hp.n_expert, ff = hp.n_ff_expert;
    l.ffn_gate_inp = b.floats(pre + "ffn_gate_inp.weight", {d, ne});
    l.ffn_exp_probs_b = b.vector(pre + "exp_probs_b.bias", ne, Need::Optional);
    l.ffn_gate_exps = b.matrix(pre + "ffn_gate_exps.weight", {d, ff, ne});
    l.ffn_up_exps = b.matrix(pre + "ffn_up_exps.weight", {d, ff, ne});
    l.ffn_down_exps = b.matrix(pre + "ffn_down_exps.weight", {ff, d, ne});
    if (const int64_t sh = hp.n_ff_shexp; sh > 0) {
        l.ffn_gate_shexp = b.matrix(pre + "ffn_gate_shexp.weight", {d, sh});
        l.ffn_up_shexp = b.matrix(pre + "ffn_up_shexp.weight", {d, sh});
        l.ffn_down_shexp = b.matrix(pre + "ffn_down_shexp.weight", {sh, d});
    }
}

// The nextn (MTP) head, the file's last block: a layer as the main ones (MLA and, past the
// leading dense layers, the MoE) with nextn.{eh_proj, enorm, hnorm, shared_head_norm (else
// output_norm), shared_head_head (else output), embed_tokens (else token_embd)}.
void bind_mtp(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    const int il = hp.n_layer + hp.n_nextn - 1;
    const std::string pre = layer_prefix(il);
    MtpWeights& m = w.mtp;
    bind_layer(b, hp, il, m.layer, w);
    bind_nextn_tensors(b, hp, pre, m);
}

void bind_deepseek2(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_io(b, hp, w);
    w.layers.resize(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il) bind_layer(b, hp, il, w.layers[size_t(il)], w);
    if (hp.n_nextn > 0) bind_mtp(b, hp, w);
}

// q (the pass's query rows, n_head heads of rope + kv_lora) from the expanded queries in
// arch[kQ]: each head's rope part, then K_b,h^T q_nope,h (the heads as one stacked matmul).
void absorb_queries(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int nh = hp.n_head, rot = hp.n_rot, hk = hp.mla_head_k;
    const int hd = hp.head_dim, ntok = st.n_rows, nope = hk - rot;
    const float* qf = st.arch[kQ].data();
    float* q = st.q.data();
    for (int t = 0; t < ntok; ++t) {
        for (int h = 0; h < nh; ++h) {
            std::memcpy(q + (int64_t(t) * nh + h) * hd, qf + (int64_t(t) * nh + h) * hk + nope,
                        sizeof(float) * rot);
        }
    }
    matmul_stack(l.wk_b_t, nh, qf, hk, ntok, q + rot, int64_t(nh) * hd, hd, *st.pool, st.mm);
}

// arch[kVOut] = each head's value V_b,h o_h for the attention's output rows (o_h: the latent
// part of head h's output in att; the heads as one stacked matmul over the V_b,h).
void expand_values(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int nh = hp.n_head, rot = hp.n_rot, hv = hp.mla_head_v, hd = hp.head_dim;
    matmul_stack(l.wv_b, nh, st.att.data() + rot, hd, st.rows, st.arch[kVOut].data(),
                 int64_t(nh) * hv, hv, *st.pool, st.mm);
}

// The queries and the cache rows of every row of the pass (st.q, st.k; no st.v: the cache's V
// rows are its K rows, HParams::kv_v_is_k, of which the attention's values are the latent part).
void mla_input(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int ntok = st.n_rows, r = hp.mla_kv_lora_rank, rot = hp.n_rot, hd = hp.head_dim;
    const int64_t qdim = int64_t(hp.n_head) * hp.mla_head_k;
    norm_rows(st, st.x.data(), l.attn_norm, ntok, st.h.data());
    float* kva = st.arch[kKvA].data();
    if (const int qr = hp.mla_q_lora_rank; qr > 0) {
        float* qa = st.arch[kQA].data();
        const MatmulJob jobs[] = {{l.wq_a, qa, qr}, {l.wkv_a_mqa, kva, r + rot}};
        matmul_multi(jobs, st.h.data(), hp.n_embd, ntok, *st.pool, st.mm);
        for (int t = 0; t < ntok; ++t)
            rms_norm(qa + int64_t(t) * qr, l.q_a_norm, qr, hp.rms_eps, qa + int64_t(t) * qr);
        matmul(l.wq_b, qa, qr, ntok, st.arch[kQ].data(), qdim, *st.pool, st.mm);
    } else {
        const MatmulJob jobs[] = {{l.wq, st.arch[kQ].data(), qdim}, {l.wkv_a_mqa, kva, r + rot}};
        matmul_multi(jobs, st.h.data(), hp.n_embd, ntok, *st.pool, st.mm);
    }
    for (int t = 0; t < ntok; ++t) {
        const float* a = kva + int64_t(t) * (r + rot);
        float* k = st.k.data() + int64_t(t) * hd;
        std::memcpy(k, a + r, sizeof(float) * rot);
        rms_norm(a, l.kv_a_norm, r, hp.rms_eps, k + rot);
    }
    absorb_queries(st, l);
}

// x += FFN(rms_norm(x) * ffn_norm): SwiGLU (a leading dense layer) or the experts plus the
// shared experts.
void mla_ffn(PassState& st, const LayerWeights& l) {
    ThreadPool& pool = *st.pool;
    const HParams& hp = st.hp;
    const int nr = st.rows;
    const int64_t d = hp.n_embd;
    norm_rows(st, st.x.data(), l.ffn_norm, nr, st.h.data());
    if (!l.ffn_gate_inp) {
        float *g = st.arch[kFfG].data(), *u = st.arch[kFfU].data();
        const MatmulJob gu[] = {{l.ffn_gate, g, hp.n_ff}, {l.ffn_up, u, hp.n_ff}};
        matmul_multi(gu, st.h.data(), d, nr, pool, st.mm);
        silu_mul_all(pool, g, u, int64_t(nr) * hp.n_ff);
        matmul(l.ffn_down, g, hp.n_ff, nr, st.tmp.data(), d, pool, st.mm);
    } else {
        st.moe.forward(l, hp, st.h.data(), nr, st.tmp.data(), pool, st.mm);
        if (const int64_t sh = hp.n_ff_shexp; sh > 0) {
            const MatmulJob gu[] = {{l.ffn_gate_shexp, st.sh_g.data(), sh},
                                    {l.ffn_up_shexp, st.sh_u.data(), sh}};
            matmul_multi(gu, st.h.data(), d, nr, pool, st.mm);
            silu_mul_all(pool, st.sh_g.data(), st.sh_u.data(), int64_t(nr) * sh);
            matmul(l.ffn_down_shexp, st.sh_g.data(), sh, nr, st.sh_d.data(), d, pool, st.mm);
            add_into_all(pool, st.tmp.data(), st.sh_d.data(), int64_t(nr) * d);
        }
    }
    add_into_all(pool, st.x.data(), st.tmp.data(), int64_t(nr) * d);
}

void block(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    mla_input(st, l);
    rope_and_cache(st);
    attend(st, l);
    expand_values(st, l);
    const int64_t vdim = int64_t(hp.n_head) * hp.mla_head_v;
    matmul(l.wo, st.arch[kVOut].data(), vdim, st.rows, st.tmp.data(), hp.n_embd, *st.pool, st.mm);
    add_into_all(*st.pool, st.x.data(), st.tmp.data(), int64_t(st.rows) * hp.n_embd);
    mla_ffn(st, l);
}

std::vector<int64_t> scratch(const HParams& hp) {
    const int64_t ff = hp.n_layer_dense_lead > 0 ? hp.n_ff : 1;
    return {int64_t(hp.n_head) * hp.mla_head_k,
            hp.mla_kv_lora_rank + hp.n_rot,
            std::max(hp.mla_q_lora_rank, 1),
            int64_t(hp.n_head) * hp.mla_head_v,
            ff,
            ff};
}

}  // namespace

const ArchSpec kDeepseek2Arch = {.name = "deepseek2",
                                 .read = read_deepseek2,
                                 .bind = bind_deepseek2,
                                 .block = block,
                                 .device_block = false,
                                 .bind_mtp = bind_mtp,
                                 .mtp_block = block,
                                 .scratch = scratch};

}  // namespace specula
