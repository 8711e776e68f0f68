// Architectures "qwen35" and "qwen35moe" (Qwen3.5 / Qwen3.6, text only): hybrid layers, three of
// every four Gated DeltaNet linear attention with a recurrent state, the fourth gated full
// attention, as ik_llama.cpp's graphs (build_qwen35, llama-delta-net) compute them.
//   hparams: {arch}.{context_length, embedding_length, block_count, feed_forward_length,
//            attention.head_count, attention.head_count_kv, attention.key_length,
//            attention.value_length, attention.layer_norm_rms_epsilon, rope.dimension_count (a
//            part of the head: partial rope), rope.freq_base, rope.dimension_sections (IMROPE,
//            4 ints), ssm.conv_kernel, ssm.state_size (the key and value heads' width),
//            ssm.group_count (key heads), ssm.time_step_rank (value heads, a multiple of the key
//            heads), ssm.inner_size (= state_size x time_step_rank), full_attention_interval
//            (default 4: layer il is full attention when (il + 1) % interval == 0),
//            nextn_predict_layers (default 0: the last ones are MTP layers, outside the main
//            pass; the last of them is bound as the model's MTP head, ModelWeights::mtp)}.
//            qwen35moe: expert_count, expert_used_count, expert_feed_forward_length (default
//            feed_forward_length / expert_used_count), expert_shared_feed_forward_length
//            (default feed_forward_length).
//   MTP head (blk.N.*, N = block_count - 1, when nextn_predict_layers > 0; or from an MTP-only
//            sidecar, model.h's LoadOptions::mtp_sidecar, through bind_mtp): a gated attention
//            layer's tensors as below, the FFN optional, and nextn.{eh_proj ([2 n_embd] ->
//            n_embd), enorm, hnorm}, optional nextn.{shared_head_norm, shared_head_head,
//            embed_tokens}; the head's output matrix is shared_head_head, else
//            output_extra.weight (ik_llama.cpp's cheaper copy for the MTP head), else output.
//   tensors: token_embd, output_norm, output (optional: tied); per layer attn_norm,
//            post_attention_norm (the FFN's input norm); DeltaNet layers attn_qkv, attn_gate,
//            ssm_conv1d, ssm_dt.bias, ssm_a, ssm_beta, ssm_alpha, ssm_norm, ssm_out; attention
//            layers attn_q (2 x head_count x key_length rows: each head's q then its gate),
//            attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm; the FFN ffn_{gate,up,down}, or
//            (qwen35moe) the router, ffn_{gate,up,down}_exps and the shared expert
//            ffn_{gate,up,down}_shexp with ffn_gate_inp_shexp. A vision tower (v.* / mm.*
//            tensors) is skipped with a note on stderr.
//   block:   DeltaNet: x += delta_net (model/blocks/blocks.h, model/state/delta_net.h); attention:
//            h = rms_norm(x) * attn_norm; [q | gate] = Wq h, k, v; q, k = per-head rms_norm;
//            rope (NEOX pairs over rope.dimension_count, the vision section unrotated);
//            x += Wo (attention * sigmoid(gate)); then x += FFN(rms_norm(x) *
//            post_attention_norm): SwiGLU, or the MoE (softmax, top k renormalised) plus the
//            shared expert scaled by sigmoid(ffn_gate_inp_shexp . h).
// Every bad or inconsistent state dimension is an Error naming the key or the tensor.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"

namespace specula {

namespace {

void note_vision(const GGUFFile& f) {
    int n = 0;
    for (const GGUFTensor& t : f.tensors())
        n += t.name.rfind("v.", 0) == 0 || t.name.rfind("mm.", 0) == 0;
    if (n > 0) {
        std::fprintf(stderr, "note: %s: %d vision tensors (v.*, mm.*) skipped: text only\n",
                     f.path().c_str(), n);
    }
}

void read_common(const GGUFFile& f, HParams& hp) {
    const std::string p = hp.arch + ".";
    read_base_hparams(f, hp);
    read_attention_hparams(f, hp);
    read_rope_hparams(f, hp);
    read_expert_hparams(f, hp);
    hp.rope_neox = true;
    hp.attn_gated = true;
    const std::vector<int32_t> sec = f.get_int_array(p + "rope.dimension_sections");
    if (sec.empty() || sec.size() > 4) {
        fail(f.path(), ": key '", p, "rope.dimension_sections' must hold up to 4 integers (got ",
             sec.size(), ")");
    }
    int sum = 0;
    for (int32_t v : sec) {
        if (v < 0 || v > hp.n_rot) fail(f.path(), ": key '", p, "rope.dimension_sections' has ", v);
        sum += v;
    }
    if (sum == 0) fail(f.path(), ": key '", p, "rope.dimension_sections' sums to 0");
    hp.rope_sections.assign(sec.begin(), sec.end());
    hp.rope_sections.resize(4, 0);
    // The recurrent layers' sizes.
    hp.ssm_d_conv = read_int(f, p + "ssm.conv_kernel", -1, 1, 64);
    hp.ssm_d_state = read_int(f, p + "ssm.state_size", -1, 1, 512);
    hp.ssm_n_group = read_int(f, p + "ssm.group_count", -1, 1, 1 << 12);
    hp.ssm_dt_rank = read_int(f, p + "ssm.time_step_rank", -1, 1, 1 << 12);
    const int inner = read_int(f, p + "ssm.inner_size", -1, 1, 1 << 20);
    if (inner != hp.ssm_d_state * hp.ssm_dt_rank) {
        fail(f.path(), ": key '", p, "ssm.inner_size' = ", inner,
             " must equal ssm.state_size x ssm.time_step_rank = ", hp.ssm_d_state * hp.ssm_dt_rank);
    }
    if (hp.ssm_dt_rank % hp.ssm_n_group != 0) {
        fail(f.path(), ": key '", p, "ssm.time_step_rank' = ", hp.ssm_dt_rank,
             " is not a multiple of ssm.group_count = ", hp.ssm_n_group);
    }
    const int interval = read_int(f, p + "full_attention_interval", 4, 1, 1 << 10);
    hp.n_nextn = read_int(f, p + "nextn_predict_layers", 0, 0, hp.n_layer - 1);
    hp.n_layer -= hp.n_nextn;  // the MTP layers are not part of the main pass
    hp.recurrent_layers.assign(size_t(hp.n_layer), 0);
    for (int il = 0; il < hp.n_layer; ++il)
        hp.recurrent_layers[size_t(il)] = (il + 1) % interval != 0;
    note_vision(f);
}

void read_dense(const GGUFFile& f, HParams& hp) {
    read_common(f, hp);
    if (hp.n_expert > 0) {
        fail(f.path(), ": key '", hp.arch,
             ".expert_count' is set: a mixture of experts is the qwen35moe architecture");
    }
}

void read_moe(const GGUFFile& f, HParams& hp) {
    read_common(f, hp);
    const std::string p = hp.arch + ".";
    if (hp.n_expert == 0) fail(f.path(), ": key '", p, "expert_count' is missing or 0");
    hp.n_ff_expert =
        read_int(f, p + "expert_feed_forward_length", hp.n_ff / hp.n_expert_used, 1, 1 << 20);
    hp.n_ff_shexp = read_int(f, p + "expert_shared_feed_forward_length", hp.n_ff, 1, 1 << 20);
}

// IMROPE (ggml's mrope cache, interleaved): pair i takes section (i % sum) % 3's position while
// below 3 x that section's size, else the fourth (vision) one, 0 for text. Those pairs get an
// infinite frequency factor: angle 0, left as they are.
void bind_rope_sections(const TensorBinder& b, const HParams& hp, ModelWeights& w) {
    if (!w.rope_freq_factors.empty()) {
        fail(b.path(), ": tensor 'rope_freqs.weight' is not part of ", hp.arch);
    }
    const auto& s = hp.rope_sections;
    const int sum = s[0] + s[1] + s[2] + s[3];
    std::vector<float> f(size_t(hp.n_rot / 2), 1.0f);
    bool any = false;
    for (int i = 0; i < hp.n_rot / 2; ++i) {
        const int sec = i % sum;
        const bool text = (sec % 3 == 0 && sec < 3 * s[0]) || (sec % 3 == 1 && sec < 3 * s[1]) ||
                          (sec % 3 == 2 && sec < 3 * s[2]);
        if (!text) {
            f[size_t(i)] = std::numeric_limits<float>::infinity();
            any = true;
        }
    }
    if (any) w.rope_freq_factors = std::move(f);
}

void bind_mtp(TensorBinder& b, const HParams& hp, ModelWeights& w);

// Gated full attention: Q carries its output gate (2 x the query width), then K, V, the output
// and the Q/K norms.
void bind_gated_attention(TensorBinder& b, const HParams& hp, const std::string& pre,
                          LayerWeights& l) {
    const int64_t d = hp.n_embd, dq = hp.n_embd_q(), dkv = hp.n_embd_kv();
    l.wq = b.matrix(pre + "attn_q.weight", {d, 2 * dq});
    l.wk = b.matrix(pre + "attn_k.weight", {d, dkv});
    l.wv = b.matrix(pre + "attn_v.weight", {d, dkv});
    l.wo = b.matrix(pre + "attn_output.weight", {dq, d});
    bind_qk_norm(b, hp, pre, l);
}

// The routed experts, their router and the shared expert with its sigmoid gate.
void bind_moe_ffn(TensorBinder& b, const HParams& hp, const std::string& pre, LayerWeights& l) {
    const int64_t d = hp.n_embd, ne = hp.n_expert, ff = hp.n_ff_expert, fs = hp.n_ff_shexp;
    l.ffn_gate_inp = b.floats(pre + "ffn_gate_inp.weight", {d, ne});
    l.ffn_gate_exps = b.matrix(pre + "ffn_gate_exps.weight", {d, ff, ne});
    l.ffn_up_exps = b.matrix(pre + "ffn_up_exps.weight", {d, ff, ne});
    l.ffn_down_exps = b.matrix(pre + "ffn_down_exps.weight", {ff, d, ne});
    l.ffn_gate_inp_shexp = b.vector(pre + "ffn_gate_inp_shexp.weight", d);
    l.ffn_gate_shexp = b.matrix(pre + "ffn_gate_shexp.weight", {d, fs});
    l.ffn_up_shexp = b.matrix(pre + "ffn_up_shexp.weight", {d, fs});
    l.ffn_down_shexp = b.matrix(pre + "ffn_down_shexp.weight", {fs, d});
}

void bind_tensors(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_io(b, hp, w);
    bind_rope_sections(b, hp, w);
    const int64_t d = hp.n_embd;
    const int64_t C = hp.ssm_conv_dim(), V = hp.ssm_value_dim(), nv = hp.ssm_dt_rank;
    w.layers.resize(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string pre = layer_prefix(il);
        LayerWeights& l = w.layers[size_t(il)];
        l.attn_norm = b.vector(pre + "attn_norm.weight", d);
        l.ffn_norm = b.vector(pre + "post_attention_norm.weight", d);
        if (hp.is_recurrent(il)) {
            l.ssm_qkv = b.matrix(pre + "attn_qkv.weight", {d, C});
            l.ssm_gate = b.matrix(pre + "attn_gate.weight", {d, V});
            l.ssm_conv1d = b.floats(pre + "ssm_conv1d.weight", {hp.ssm_d_conv, C});
            l.ssm_dt = b.vector(pre + "ssm_dt.bias", nv);
            l.ssm_a = b.vector(pre + "ssm_a", nv);
            l.ssm_beta = b.matrix(pre + "ssm_beta.weight", {d, nv});
            l.ssm_alpha = b.matrix(pre + "ssm_alpha.weight", {d, nv});
            l.ssm_norm = b.vector(pre + "ssm_norm.weight", hp.ssm_d_state);
            l.ssm_out = b.matrix(pre + "ssm_out.weight", {V, d});
        } else {
            bind_gated_attention(b, hp, pre, l);
        }
        if (hp.n_expert == 0) {
            l.ffn_gate = b.matrix(pre + "ffn_gate.weight", {d, hp.n_ff});
            l.ffn_up = b.matrix(pre + "ffn_up.weight", {d, hp.n_ff});
            l.ffn_down = b.matrix(pre + "ffn_down.weight", {hp.n_ff, d});
            continue;
        }
        bind_moe_ffn(b, hp, pre, l);
    }
    if (hp.n_nextn > 0) bind_mtp(b, hp, w);
}

void bind_mtp(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    const int64_t d = hp.n_embd;
    const std::string pre = layer_prefix(hp.n_layer + hp.n_nextn - 1);
    MtpWeights& m = w.mtp;
    LayerWeights& l = m.layer;
    l.attn_norm = b.vector(pre + "attn_norm.weight", d);
    bind_gated_attention(b, hp, pre, l);
    l.ffn_norm = b.vector(pre + "post_attention_norm.weight", d);
    if (hp.n_expert == 0) {
        l.ffn_gate = b.matrix(pre + "ffn_gate.weight", {d, hp.n_ff}, Need::Optional);
        if (l.ffn_gate.data) {
            l.ffn_up = b.matrix(pre + "ffn_up.weight", {d, hp.n_ff});
            l.ffn_down = b.matrix(pre + "ffn_down.weight", {hp.n_ff, d});
        }
    } else {
        bind_moe_ffn(b, hp, pre, l);
    }
    bind_nextn_tensors(b, hp, pre, m);
}

// qwen35's own pass buffers: the gated Q rows (each head's q then its gate) and the gate.
enum Scratch { kQGate, kGate };
std::vector<int64_t> scratch(const HParams& hp) {
    return {2 * hp.n_embd_q(), hp.n_embd_q()};
}

// The gated attention input: Wq's rows hold each head's q then its output gate; q and the gate
// are split apart (the gate applies after the attention: apply_gate).
void gated_attention_input(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int64_t dq = hp.n_embd_q(), dkv = hp.n_embd_kv(), hd = hp.head_dim;
    const int ntok = st.n_rows;
    float* qg = st.arch[kQGate].data();
    float* gate = st.arch[kGate].data();
    norm_rows(st, st.x.data(), l.attn_norm, ntok, st.h.data());
    const MatmulJob qkv[] = {
        {l.wq, qg, 2 * dq}, {l.wk, st.k.data(), dkv}, {l.wv, st.v.data(), dkv}};
    matmul_multi(qkv, st.h.data(), hp.n_embd, ntok, *st.pool, st.mm);
    for (int t = 0; t < ntok; ++t) {
        for (int h = 0; h < hp.n_head; ++h) {
            const float* r = qg + t * 2 * dq + h * 2 * hd;
            std::memcpy(st.q.data() + t * dq + h * hd, r, sizeof(float) * hd);
            std::memcpy(gate + t * dq + h * hd, r + hd, sizeof(float) * hd);
        }
    }
}

// out *= sigmoid(gate), each attended row by the gate of its own position.
void apply_gate(PassState& st) {
    const int64_t dq = st.hp.n_embd_q();
    for (size_t s = 0; s < st.segs.size(); ++s) {
        const AttendedRows r = attended_rows(st, s);
        const float* g = st.arch[kGate].data() + r.src * dq;
        float* a = st.att.data() + r.dst * dq;
        for (int64_t i = 0; i < r.n * dq; ++i) a[i] *= 1.0f / (1.0f + std::exp(-g[i]));
    }
}

// The gated full-attention layer: the main pass's attention layers, and the MTP head's.
void gated_attention(PassState& st, const LayerWeights& l) {
    gated_attention_input(st, l);
    qk_norm(st, l);
    rope_and_cache(st);
    attend(st, l);
    apply_gate(st);
    attention_project(st, l);
}

void block(PassState& st, const LayerWeights& l) {
    if (l.ssm_qkv.data)
        delta_net(st, l);
    else
        gated_attention(st, l);
    ffn(st, l);
}

// The MTP head's layer: gated attention over the head's own cache, then its FFN when it has one.
void mtp_block(PassState& st, const LayerWeights& l) {
    gated_attention(st, l);
    if (l.ffn_gate.data || l.ffn_gate_exps.data) ffn(st, l);
}

// The two differ in their hyperparameters' reader only. The Vulkan backend has no DeltaNet
// shader: qwen35 layers run on the CPU.
constexpr ArchSpec qwen35_spec(const char* name, void (*read)(const GGUFFile&, HParams&)) {
    return {.name = name,
            .read = read,
            .bind = bind_tensors,
            .block = block,
            .device_block = false,
            .bind_mtp = bind_mtp,
            .mtp_block = mtp_block,
            .scratch = scratch};
}

}  // namespace

const ArchSpec kQwen35Arch = qwen35_spec("qwen35", read_dense);
const ArchSpec kQwen35MoeArch = qwen35_spec("qwen35moe", read_moe);

}  // namespace specula
