// Architectures "gemma2" and "gemma3": pre- and post-norms around attention and FFN, GeGLU, the
// embedding scaled by sqrt(n_embd), tied output, NEOX rope, sliding-window layers interleaved with
// global ones (model/load/hparams.h HParams::n_swa), as ik_llama.cpp's graphs compute them.
//   hparams: {arch}.{context_length, embedding_length, block_count, feed_forward_length,
//            attention.head_count, attention.head_count_kv, attention.key_length,
//            attention.value_length, attention.layer_norm_rms_epsilon, rope.dimension_count,
//            rope.freq_base, rope.scaling.*, attention.sliding_window}; no experts.
//            gemma2: sliding_window defaults to 4096; attn_logit_softcapping (default 50) and
//            final_logit_softcapping (default 30) must be > 0. Even layers (0, 2, ..) slide; every
//            layer rotates with rope.freq_base and the rope scaling.
//            gemma3: sliding_window is required; layers il with (il + 1) % 6 != 0 slide (five
//            local, then one global) and rotate with base 10000 and no scaling, the global ones
//            with rope.freq_base and rope.scaling.* (ik_llama.cpp ignores rope.freq_base_swa for
//            gemma3, and so do we).
//            The attention scale is 1/sqrt(head_dim), except for the 27B shapes (46 layers for
//            gemma2, 62 for gemma3), whose query_pre_attn_scalar is n_embd / head_count:
//            1/sqrt(n_embd / head_count) there (ik_llama.cpp picks it by the same layer counts).
//   tensors: token_embd, output_norm, output (optional: tied to token_embd); per layer
//            blk.N.attn_norm, attn_{q,k,v,output} (no biases), post_attention_norm, ffn_norm,
//            ffn_{gate,up,down}, post_ffw_norm; gemma3 also attn_q_norm and attn_k_norm.
//   block:   h = rms_norm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h;
//            gemma3: q, k = per-head rms_norm * attn_{q,k}_norm; rope (NEOX, the layer's base);
//            a = attention(q, K, V) within the layer's window (gemma2: scores soft-capped);
//            x += rms_norm(Wo a) * post_attention_norm;
//            x += rms_norm(down(gelu(gate h) * up h)) * post_ffw_norm with h = rms_norm(x) *
//            ffn_norm; logits = output(rms_norm(x) * output_norm) (gemma2: soft-capped).
#include <cmath>

#include "common/error.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"

namespace specula {

namespace {

void read_common(const GGUFFile& f, HParams& hp, int layers_27b) {
    read_base_hparams(f, hp);
    read_attention_hparams(f, hp);
    read_rope_hparams(f, hp);
    read_expert_hparams(f, hp);
    if (hp.n_expert > 0) {
        fail(f.path(), ": key '", hp.arch, ".expert_count' is set: ", hp.arch,
             " has no mixture of experts");
    }
    hp.rope_neox = true;
    hp.ffn_act = HParams::FfnAct::GeluTanh;
    hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
    const bool is_27b = hp.n_layer == layers_27b;
    if (is_27b && hp.n_embd % hp.n_head != 0) {
        fail(f.path(), ": ", hp.arch, ".embedding_length (", hp.n_embd,
             ") is not a multiple of attention.head_count (", hp.n_head, ")");
    }
    const int scalar = is_27b ? hp.n_embd / hp.n_head : hp.head_dim;
    hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
    hp.swa_layers.assign(static_cast<size_t>(hp.n_layer), 0);
}

float read_softcap(const GGUFFile& f, const HParams& hp, const char* name, double def) {
    const std::string key = hp.arch + "." + name;
    const double v = f.get_float_or(key, def);
    if (!std::isfinite(v) || v <= 0) fail(f.path(), ": key '", key, "' = ", v, " must be > 0");
    return static_cast<float>(v);
}

void read_gemma2(const GGUFFile& f, HParams& hp) {
    read_common(f, hp, /*layers_27b=*/46);
    read_sliding_window(f, hp, 4096);
    for (int il = 0; il < hp.n_layer; il += 2) hp.swa_layers[static_cast<size_t>(il)] = 1;
    hp.rope_freq_base_swa = hp.rope_freq_base;
    hp.rope_freq_scale_swa = hp.rope_freq_scale;
    hp.attn_softcap = read_softcap(f, hp, "attn_logit_softcapping", 50.0);
    hp.final_softcap = read_softcap(f, hp, "final_logit_softcapping", 30.0);
}

void read_gemma3(const GGUFFile& f, HParams& hp) {
    read_common(f, hp, /*layers_27b=*/62);
    read_sliding_window(f, hp, -1);
    for (int il = 0; il < hp.n_layer; ++il)
        hp.swa_layers[static_cast<size_t>(il)] = (il + 1) % 6 != 0;
    hp.rope_freq_base_swa = 10000.f;
    hp.rope_freq_scale_swa = 1.f;
}

void bind_common(TensorBinder& b, const HParams& hp, ModelWeights& w, bool qk_norm) {
    bind_io(b, hp, w);
    if (!w.rope_freq_factors.empty()) {
        // ik_llama.cpp's gemma graphs rotate without frequency factors.
        fail(b.path(), ": tensor 'rope_freqs.weight' is not part of ", hp.arch,
             " (its rope has no frequency factors)");
    }
    w.layers.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string pre = layer_prefix(il);
        LayerWeights& l = w.layers[il];
        bind_attention(b, hp, pre, Need::Optional, l);
        if (l.bq || l.bk || l.bv || l.bo) {
            fail(b.path(), ": layer ", il, " has attention biases (", pre,
                 "attn_*.bias): ", hp.arch, " has none");
        }
        if (qk_norm) bind_qk_norm(b, hp, pre, l);
        bind_ffn(b, hp, pre, l);
        bind_post_norms(b, hp, pre, l);
    }
}

void bind_gemma2(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_common(b, hp, w, /*qk_norm=*/false);
}
void bind_gemma3(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_common(b, hp, w, /*qk_norm=*/true);
}

void block(PassState& st, const LayerWeights& l) {
    attention_input(st, l);
    if (l.q_norm) qk_norm(st, l);
    rope_and_cache(st);
    attention_output(st, l);
    ffn(st, l);
}

}  // namespace

// On Vulkan, gemma3's layers run on the device; gemma2's stay on the CPU (no soft-capping shader:
// the plan says so).
const ArchSpec kGemma2Arch = {"gemma2", read_gemma2, bind_gemma2, block, /*device_block=*/true};
const ArchSpec kGemma3Arch = {"gemma3", read_gemma3, bind_gemma3, block, /*device_block=*/true};

}  // namespace specula
