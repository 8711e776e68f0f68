// Architecture "phi3": Phi-3, Phi-3.5 and Phi-4 (ik_llama.cpp's build_phi3). Llama's pre-norm
// block with fused matrices, NEOX rope, LongRoPE factors and an optional sliding window.
//   hparams: phi3.{context_length, embedding_length, block_count, feed_forward_length,
//            attention.head_count, attention.head_count_kv, attention.layer_norm_rms_epsilon,
//            rope.dimension_count, rope.freq_base, rope.scaling.{factor, attn_factor,
//            original_context_length}, attention.sliding_window}. The heads must fill
//            embedding_length. sliding_window 0 (Phi-4) is full attention; when the key is absent
//            ik_llama.cpp's defaults for the Phi-3 shapes that predate it apply (2047 for 32 or 40
//            layers with a 4096 context; 262144 / 131072 for the 128k mini / medium), and any
//            other file without it is an error.
//   tensors: token_embd, output_norm, output (required: phi3 does not tie it), the optional
//            rope_factors_long / rope_factors_short (head_dim / 2 each; LongRoPE); per layer
//            blk.N.attn_norm, attn_qkv ([n_embd, n_embd + 2 n_embd_kv]: rows Q | K | V),
//            attn_output, ffn_norm, ffn_up ([n_embd, 2 n_ff]: rows gate | up), ffn_down.
//   block:   h = rms_norm(x) * attn_norm; [q | k | v] = Wqkv h; rope (NEOX; the long factors
//            when the session's context exceeds original_context_length, else the short ones);
//            q *= 1/sqrt(head_dim); x += Wo attention(q, K, V) with softmax scale 1, each query
//            seeing the last sliding_window positions when set;
//            [g | u] = Wup (rms_norm(x) * ffn_norm); x += Wdown (silu(g) * u).
// The fused matrices are bound as they are stored (one matmul each, its output split); nothing is
// copied at load.
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "kernels/ops.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"

namespace specula {

namespace {

// ik_llama.cpp's sliding window for Phi-3 files written before the key existed.
int legacy_sliding_window(const HParams& hp) {
    if ((hp.n_layer == 32 || hp.n_layer == 40) && hp.n_ctx_train == 4096) return 2047;
    if (hp.n_layer == 32 && hp.n_head_kv == 32 && hp.n_ctx_train == 131072) return 262144;
    if (hp.n_layer == 40 && hp.n_ctx_train == 131072) return 131072;
    return 0;
}

void read_keys(const GGUFFile& f, HParams& hp) {
    read_base_hparams(f, hp);
    read_attention_hparams(f, hp);
    read_rope_hparams(f, hp, /*allow_yarn=*/false);
    read_expert_hparams(f, hp);
    const std::string p = hp.arch + ".";
    if (hp.n_expert > 0) {
        fail(f.path(), ": key '", p, "expert_count' is set: phi3 has no experts");
    }
    if (hp.n_embd_q() != hp.n_embd) {
        fail(f.path(), ": ", p, "attention.key_length (", hp.head_dim, ") x head_count (",
             hp.n_head, ") must equal embedding_length (", hp.n_embd, ") for phi3");
    }
    hp.rope_neox = true;
    hp.attn_scale = 1.0f;  // q is scaled by 1/sqrt(head_dim) before the attention instead
    const std::string swa = p + "attention.sliding_window";
    const int64_t legacy = legacy_sliding_window(hp);
    if (!f.has(swa) && legacy == 0) {
        fail(f.path(), ": missing key '", swa, "' (0 for none, as Phi-4 writes it)");
    }
    const int64_t n_swa = f.get_int_or(swa, legacy);
    if (n_swa < 0 || n_swa > (int64_t{1} << 30)) {
        fail(f.path(), ": key '", swa, "' = ", n_swa, " is out of range [0, 2^30]");
    }
    hp.n_swa = static_cast<int>(n_swa);
    // One window for every layer (HParams::swa_layers), rotated like the rest.
    hp.swa_layers.assign(static_cast<size_t>(hp.n_layer), 1);
    hp.rope_freq_base_swa = hp.rope_freq_base;
    hp.rope_freq_scale_swa = hp.rope_freq_scale;
}

void bind_rope_factors(TensorBinder& b, const HParams& hp, const char* name,
                       std::vector<float>& out) {
    const int64_t n = hp.head_dim / 2;
    if (const float* v = b.vector(name, n, Need::Optional)) out.assign(v, v + n);
}

void bind_tensors(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    const int64_t d = hp.n_embd, dkv = hp.n_embd_kv(), ff = hp.n_ff;
    w.tok_embd = b.matrix("token_embd.weight", {d, hp.n_vocab});
    w.output_norm = b.vector("output_norm.weight", d);
    w.output = b.matrix("output.weight", {d, hp.n_vocab});
    bind_rope_factors(b, hp, "rope_factors_long.weight", w.rope_factors_long);
    bind_rope_factors(b, hp, "rope_factors_short.weight", w.rope_factors_short);
    w.layers.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string pre = layer_prefix(il);
        LayerWeights& l = w.layers[il];
        l.attn_norm = b.vector(pre + "attn_norm.weight", d);
        l.wqkv = b.matrix(pre + "attn_qkv.weight", {d, d + 2 * dkv});
        l.wo = b.matrix(pre + "attn_output.weight", {d, d});
        l.ffn_norm = b.vector(pre + "ffn_norm.weight", d);
        l.ffn_gate_up = b.matrix(pre + "ffn_up.weight", {d, 2 * ff});
        l.ffn_down = b.matrix(pre + "ffn_down.weight", {ff, d});
    }
}

// phi3's own pass buffers: the fused QKV output and the fused gate | up output, per row.
enum Scratch { kQkv, kGateUp };
std::vector<int64_t> scratch(const HParams& hp) {
    return {hp.n_embd_q() + 2 * hp.n_embd_kv(), 2 * int64_t{hp.n_ff}};
}

// h = rms_norm(x) * attn_norm; one matmul by Wqkv, its rows split into q, k, v.
void attention_input_fused(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int64_t dq = hp.n_embd_q(), dkv = hp.n_embd_kv(), w = dq + 2 * dkv;
    const int ntok = st.n_rows;
    float* qkv = st.arch[kQkv].data();
    norm_rows(st, st.x.data(), l.attn_norm, ntok, st.h.data());
    matmul(l.wqkv, st.h.data(), hp.n_embd, ntok, qkv, w, *st.pool, st.mm);
    for (int t = 0; t < ntok; ++t) {
        const float* r = qkv + t * w;
        std::memcpy(st.q.data() + t * dq, r, sizeof(float) * dq);
        std::memcpy(st.k.data() + t * dkv, r + dq, sizeof(float) * dkv);
        std::memcpy(st.v.data() + t * dkv, r + dq + dkv, sizeof(float) * dkv);
    }
}

// q *= s: phi3 scales q by 1/sqrt(head_dim) after the rope, and its softmax by 1.
void scale_q(PassState& st, float s) {
    const int64_t n = static_cast<int64_t>(st.n_rows) * st.hp.n_embd_q();
    float* q = st.q.data();
    for (int64_t i = 0; i < n; ++i) q[i] *= s;
}

// x += down(silu(g) * u) with [g | u] = Wup (rms_norm(x) * ffn_norm): one matmul for both.
void ffn_fused(PassState& st, const LayerWeights& l) {
    ThreadPool& pool = *st.pool;
    const int nrows = st.rows;
    const int64_t nff = st.hp.n_ff, w = 2 * nff, d = st.hp.n_embd;
    float* gu = st.arch[kGateUp].data();
    norm_rows(st, st.x.data(), l.ffn_norm, nrows, st.h.data());
    matmul(l.ffn_gate_up, st.h.data(), d, nrows, gu, w, pool, st.mm);
    over_items(pool, nrows, w, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) silu_mul(gu + t * w, gu + t * w + nff, nff);
    });
    matmul(l.ffn_down, gu, w, nrows, st.tmp.data(), d, pool, st.mm);
    add_into_all(pool, st.x.data(), st.tmp.data(), static_cast<int64_t>(nrows) * d);
}

void block(PassState& st, const LayerWeights& l) {
    attention_input_fused(st, l);
    rope_and_cache(st);
    scale_q(st, 1.0f / std::sqrt(static_cast<float>(st.hp.head_dim)));
    attention_output(st, l);
    ffn_fused(st, l);
}

}  // namespace

// The Vulkan backend has no fused-matrix or sliding-window layer: phi3 layers run on the CPU.
const ArchSpec kPhi3Arch = {.name = "phi3",
                            .read = read_keys,
                            .bind = bind_tensors,
                            .block = block,
                            .device_block = false,
                            .scratch = scratch};

}  // namespace specula
