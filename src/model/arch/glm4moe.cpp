// Architecture "glm4moe" (GLM-4.5, 4.6 and 4.7's MoE models, with their built-in nextn MTP
// layer), as ik_llama.cpp's build_glm4_moe computes it.
//   hparams: glm4moe.{context_length, embedding_length, block_count (the MTP layers included),
//            feed_forward_length (the leading dense layers' width), attention.head_count,
//            attention.head_count_kv, attention.key_length (GLM's heads are wider than
//            embedding_length / head_count), attention.value_length,
//            attention.layer_norm_rms_epsilon, rope.dimension_count (partial rotary: a part of
//            the head), rope.freq_base, rope.scaling.*, expert_count, expert_used_count,
//            expert_feed_forward_length (each expert's width), expert_shared_count (shared
//            experts: one SwiGLU of expert_feed_forward_length x count, ungated),
//            leading_dense_block_count (default 0: the first layers have a dense FFN),
//            expert_weights_scale, expert_weights_norm (default false), expert_gating_func
//            (2 sigmoid, the default and GLM's; 1 softmax), expert_group_count /
//            expert_group_used_count (default 1: GLM routes over every expert, as
//            ik_llama.cpp does; group-limited routing is refused), nextn_predict_layers
//            (default 0: the last ones are MTP layers, outside the main pass; the last of them
//            is bound as the model's MTP head)}.
//   tensors: token_embd, output_norm, output (optional: tied); per layer attn_norm, attn_q/k/v
//            with their biases, attn_output, optional attn_q_norm / attn_k_norm (head_dim; both
//            or neither), post_attention_norm (the FFN's input norm); a dense layer
//            ffn_{gate,up,down}; an MoE layer the router ffn_gate_inp, the selection bias
//            exp_probs_b.bias, ffn_{gate,up,down}_exps and, with shared experts,
//            ffn_{gate,up,down}_shexp.
//   MTP head (blk.N.*, N = block_count - 1): an MoE layer's tensors as above plus
//            nextn.{eh_proj ([2 n_embd] -> n_embd), enorm, hnorm}, optional
//            nextn.{shared_head_norm, shared_head_head (else the output), embed_tokens (else
//            token_embd)} (GLM-4.6 ships neither of the last two); or from an MTP-only sidecar
//            (model.h's LoadOptions::mtp_sidecar) through bind_mtp.
//   block:   h = rms_norm(x) * attn_norm; q, k, v = Wq h + bq, Wk h + bk, Wv h + bv; q, k =
//            per-head rms_norm where the layer has the norms; rope (NEOX) over
//            rope.dimension_count of each head; x += Wo attention; x += FFN(rms_norm(x) *
//            post_attention_norm): SwiGLU in the leading dense layers, else the MoE
//            (model/blocks/moe.h: sigmoid weights, the top k chosen by weight + exp_probs_b,
//            renormalised where expert_weights_norm says, times expert_weights_scale) plus the
//            shared experts.
// A key that contradicts the file's tensors (the shared expert count, the leading dense layers)
// is an Error naming the key, the tensor and the file.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"

namespace specula {

namespace {

// The routing keys: how many experts, shared experts and leading dense layers, and how the
// router weighs its choices.
void read_routing(const GGUFFile& f, HParams& hp) {
    const std::string p = hp.arch + ".";
    if (hp.n_expert == 0) fail(f.path(), ": key '", p, "expert_count' is missing or 0");
    hp.n_ff_expert = read_int(f, p + "expert_feed_forward_length", -1, 1, 1 << 20);
    hp.n_ff_shexp = hp.n_ff_expert * read_int(f, p + "expert_shared_count", -1, 0, 64);
    hp.n_layer_dense_lead = read_int(f, p + "leading_dense_block_count", 0, 0, hp.n_layer);
    const std::string skey = p + "expert_weights_scale";
    if (!f.has(skey)) fail(f.path(), ": missing key '", skey, "'");
    const double scale = f.get_float_or(skey, 1.0);
    if (!std::isfinite(scale) || scale <= 0)
        fail(f.path(), ": key '", skey, "' = ", scale, " must be > 0");
    hp.moe_w_scale = float(scale);
    hp.moe_norm_w = f.get_bool_or(p + "expert_weights_norm", false);
    hp.moe_sigmoid = read_int(f, p + "expert_gating_func", 2, 1, 2) == 2;
    const std::string gkey = p + "expert_group_count", ukey = p + "expert_group_used_count";
    const int groups = read_int(f, gkey, 1, 1, 64);
    if (hp.n_expert % groups != 0) {
        fail(f.path(), ": key '", gkey, "' = ", groups, " does not divide expert_count (",
             hp.n_expert, ")");
    }
    const int used = read_int(f, ukey, groups, 1, groups);
    if (used < groups) {
        fail(f.path(), ": key '", ukey, "' = ", used, " of ", groups,
             " expert groups: group-limited routing is not part of glm4moe (every expert "
             "competes, as in ik_llama.cpp)");
    }
}

// Every layer the file holds (main and MTP) has the FFN the keys say: a router exactly from
// leading_dense_block_count on, shared experts exactly when expert_shared_count says so and of
// its width. Layers without tensors are left to the file checks (an MTP sidecar has only its
// head's).
void check_ffn_tensors(const GGUFFile& f, const HParams& hp, int n_blocks) {
    const std::string p = hp.arch + ".";
    for (int il = 0; il < n_blocks; ++il) {
        const std::string pre = layer_prefix(il);
        if (!f.find_tensor(pre + "attn_norm.weight")) continue;
        const bool moe = f.find_tensor(pre + "ffn_gate_inp.weight") != nullptr;
        if (moe != (il >= hp.n_layer_dense_lead)) {
            fail(f.path(), ": key '", p, "leading_dense_block_count' = ", hp.n_layer_dense_lead,
                 " makes layer ", il,
                 moe ? " dense, but it has the router '" : " MoE, but it has no router '", pre,
                 "ffn_gate_inp.weight'");
        }
        const GGUFTensor* sh = f.find_tensor(pre + "ffn_gate_shexp.weight");
        if (!moe || (!sh && hp.n_ff_shexp == 0)) continue;
        const int64_t width = sh && sh->ne.size() == 2 ? sh->ne[1] : 0;
        if (width != hp.n_ff_shexp) {
            fail(f.path(), ": key '", p, "expert_shared_count' = ", hp.n_ff_shexp / hp.n_ff_expert,
                 " asks for shared experts ", hp.n_ff_shexp, " wide (", hp.n_ff_expert,
                 " each), but tensor '", pre, "ffn_gate_shexp.weight' ",
                 sh ? "is " + std::to_string(width) + " wide" : std::string("is absent"));
        }
    }
}

void read_glm4moe(const GGUFFile& f, HParams& hp) {
    read_base_hparams(f, hp);
    read_attention_hparams(f, hp);
    read_rope_hparams(f, hp);
    read_expert_hparams(f, hp);
    hp.rope_neox = true;
    read_routing(f, hp);
    const int n_blocks = hp.n_layer;
    hp.n_nextn = read_int(f, hp.arch + ".nextn_predict_layers", 0, 0, hp.n_layer - 1);
    hp.n_layer -= hp.n_nextn;  // the MTP layers are not part of the main pass
    check_ffn_tensors(f, hp, n_blocks);
    hp.n_layer_dense_lead = std::min(hp.n_layer_dense_lead, hp.n_layer);
}

// One layer (main or MTP): the attention with its biases and optional Q/K norms, the FFN.
void bind_layer(TensorBinder& b, const HParams& hp, int il, LayerWeights& l) {
    const std::string pre = layer_prefix(il);
    const int64_t d = hp.n_embd;
    bind_attention(b, hp, pre, Need::Required, l);
    l.q_norm = b.vector(pre + "attn_q_norm.weight", hp.head_dim, Need::Optional);
    l.k_norm = b.vector(pre + "attn_k_norm.weight", hp.head_dim, Need::Optional);
    if (!l.q_norm != !l.k_norm) {
        fail(b.path(), ": layer ", il, " has ", l.q_norm ? "attn_q_norm" : "attn_k_norm",
             " without ", l.q_norm ? "attn_k_norm" : "attn_q_norm");
    }
    l.ffn_norm = b.vector(pre + "post_attention_norm.weight", d);
    if (il < hp.n_layer_dense_lead) {
        l.ffn_gate = b.matrix(pre + "ffn_gate.weight", {d, hp.n_ff});
        l.ffn_up = b.matrix(pre + "ffn_up.weight", {d, hp.n_ff});
        l.ffn_down = b.matrix(pre + "ffn_down.weight", {hp.n_ff, d});
        return;
    }
    const int64_t ne = hp.n_expert, ff = hp.n_ff_expert, fs = hp.n_ff_shexp;
    l.ffn_gate_inp = b.floats(pre + "ffn_gate_inp.weight", {d, ne});
    l.ffn_exp_probs_b = b.vector(pre + "exp_probs_b.bias", ne);
    l.ffn_gate_exps = b.matrix(pre + "ffn_gate_exps.weight", {d, ff, ne});
    l.ffn_up_exps = b.matrix(pre + "ffn_up_exps.weight", {d, ff, ne});
    l.ffn_down_exps = b.matrix(pre + "ffn_down_exps.weight", {ff, d, ne});
    if (fs == 0) return;
    l.ffn_gate_shexp = b.matrix(pre + "ffn_gate_shexp.weight", {d, fs});
    l.ffn_up_shexp = b.matrix(pre + "ffn_up_shexp.weight", {d, fs});
    l.ffn_down_shexp = b.matrix(pre + "ffn_down_shexp.weight", {fs, d});
}

void bind_mtp(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    const int il = hp.n_layer + hp.n_nextn - 1;
    const std::string pre = layer_prefix(il);
    MtpWeights& m = w.mtp;
    bind_layer(b, hp, il, m.layer);
    bind_nextn_tensors(b, hp, pre, m);
}

void bind_tensors(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_io(b, hp, w);
    w.layers.resize(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il) bind_layer(b, hp, il, w.layers[size_t(il)]);
    if (hp.n_nextn > 0) bind_mtp(b, hp, w);
}

// The leading dense layers' FFN buffers (gate and up, n_ff per row; the MoE keeps its own).
enum Scratch { kFfG, kFfU };
std::vector<int64_t> scratch(const HParams& hp) {
    const int64_t ff = hp.n_layer_dense_lead > 0 ? hp.n_ff : 1;
    return {ff, ff};
}

// x += down(silu(gate h) * up h), h = rms_norm(x) * post_attention_norm: a leading dense layer.
void dense_layer_ffn(PassState& st, const LayerWeights& l) {
    ThreadPool& pool = *st.pool;
    const int nr = st.rows;
    const int64_t d = st.hp.n_embd, ff = st.hp.n_ff;
    float *g = st.arch[kFfG].data(), *u = st.arch[kFfU].data();
    norm_rows(st, st.x.data(), l.ffn_norm, nr, st.h.data());
    const MatmulJob gate_up[] = {{l.ffn_gate, g, ff}, {l.ffn_up, u, ff}};
    matmul_multi(gate_up, st.h.data(), d, nr, pool, st.mm);
    silu_mul_all(pool, g, u, int64_t(nr) * ff);
    matmul(l.ffn_down, g, ff, nr, st.tmp.data(), d, pool, st.mm);
    add_into_all(pool, st.x.data(), st.tmp.data(), int64_t(nr) * d);
}

// A main layer, and the MTP head's (over the head's own cache: PassState::mtp). The MoE layers'
// FFN is the shared block's (routed experts plus the ungated shared ones).
void block(PassState& st, const LayerWeights& l) {
    attention_input(st, l);
    if (l.q_norm) qk_norm(st, l);
    rope_and_cache(st);
    attention_output(st, l);
    if (l.ffn_gate_inp)
        ffn(st, l);
    else
        dense_layer_ffn(st, l);
}

}  // namespace

// Its layers run on the CPU (the device has no expert shaders).
const ArchSpec kGlm4MoeArch = {.name = "glm4moe",
                               .read = read_glm4moe,
                               .bind = bind_tensors,
                               .block = block,
                               .device_block = false,
                               .bind_mtp = bind_mtp,
                               .mtp_block = block,
                               .scratch = scratch};

}  // namespace specula
