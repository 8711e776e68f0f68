// Hyperparameters: the numbers every block of the forward pass is sized by, and the readers an
// architecture file (model/arch/*.cpp) calls for the `{arch}.*` GGUF keys it uses. Each reader
// applies llama.cpp's default for an absent key and range-checks the value, so the forward pass
// can size its buffers from HParams without further checks; a bad or missing key is an Error
// naming the file and the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace specula {

struct HParams {
    std::string arch;  // general.architecture, as the registry names it (model/arch.h)
    int n_vocab = 0;
    int n_ctx_train = 0;
    int n_embd = 0;
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim = 0;  // n_embd / n_head unless the file says otherwise
    int n_ff = 0;
    int n_expert = 0;  // 0: dense FFN
    int n_expert_used = 0;
    int n_ff_expert = 0;  // rows of each expert's gate/up (n_ff unless the file says otherwise)
    // How the MoE routes (model/moe.h): softmax over all experts then the top k renormalised
    // (Mixtral, qwen3moe), or the top k logits then a softmax over them (gpt-oss); and the
    // experts' activation: SwiGLU, or gpt-oss's clamped SwiGLU (model/ops.h swiglu_oai).
    enum class MoeRouting : uint8_t { SoftmaxTopKNorm, TopKSoftmax };
    enum class MoeAct : uint8_t { SiLU, SwigluOai };
    MoeRouting moe_routing = MoeRouting::SoftmaxTopKNorm;
    MoeAct moe_act = MoeAct::SiLU;
    int n_rot = 0;  // rope dimensions (rope.dimension_count, default head_dim)
    bool rope_neox = false;
    float rope_freq_base = 10000.f;
    float rope_freq_scale = 1.f;
    // YaRN (rope.scaling.type = yarn; model/rope.h): ggml's defaults ext_factor 1, attn_factor 1,
    // beta_fast 32, beta_slow 1, over the original context yarn_orig_ctx.
    bool rope_yarn = false;
    int yarn_orig_ctx = 0;
    float rms_eps = 1e-5f;
    // Sliding-window attention: in a layer marked in swa_layers a query at position i sees the
    // keys at positions j with 0 <= i - j < n_swa (ik_llama.cpp's mask: masked when
    // i - j >= n_swa), i.e. itself and the n_swa - 1 before it. n_swa = 0: every layer global.
    // Sliding-window layers rotate with their own rope base and scale.
    int n_swa = 0;
    std::vector<uint8_t> swa_layers;  // n_layer flags (empty: none)
    float rope_freq_base_swa = 10000.f;
    float rope_freq_scale_swa = 1.f;
    // Gemma's extras (the defaults are llama's): the attention's scale of q.k (0:
    // 1/sqrt(head_dim)), soft-capping of the attention scores and of the final logits (x = cap
    // tanh(x / cap); 0: none), the embedding rows scaled by embd_scale (0: not scaled), the FFN's
    // activation.
    float attn_scale = 0.f;
    float attn_softcap = 0.f;
    float final_softcap = 0.f;
    float embd_scale = 0.f;
    enum class FfnAct { SiLU, GeluTanh } ffn_act = FfnAct::SiLU;

    bool is_swa(int il) const {
        return n_swa > 0 && il >= 0 && static_cast<size_t>(il) < swa_layers.size() &&
               swa_layers[static_cast<size_t>(il)] != 0;
    }
    // The window of layer il's attention (0: the whole causal prefix).
    int window(int il) const { return is_swa(il) ? n_swa : 0; }
    bool any_swa() const {
        for (int il = 0; il < n_layer; ++il)
            if (is_swa(il)) return true;
        return false;
    }

    int n_embd_q() const { return n_head * head_dim; }      // width of Q and of the attention out
    int n_embd_kv() const { return n_head_kv * head_dim; }  // width of K and V (one cache row)
};

// The readers take the key prefix `{arch}.` (hp.arch + ".") from hp.arch.

// context_length, embedding_length, block_count, feed_forward_length and
// attention.layer_norm_rms_epsilon (default 1e-5).
void read_base_hparams(const GGUFFile& f, HParams& hp);

// attention.head_count, attention.head_count_kv (default head_count), attention.key_length
// (default n_embd / n_head) and attention.value_length (must equal key_length).
void read_attention_hparams(const GGUFFile& f, HParams& hp);

// rope.dimension_count (default head_dim), rope.freq_base (default 10000) and linear or YaRN
// scaling (rope.scaling.type / rope.scaling.factor or the older rope.scale_linear;
// rope.scaling.original_context_length for YaRN, default context_length). Needs the attention
// hparams first (the rotated dimensions must fit in a head).
void read_rope_hparams(const GGUFFile& f, HParams& hp);

// expert_count and expert_used_count (0: a dense FFN); n_ff_expert = n_ff.
void read_expert_hparams(const GGUFFile& f, HParams& hp);

// attention.sliding_window into n_swa (default `def`; def < 0: required), >= 1. Sets no layer
// flags: the architecture marks swa_layers (n_layer entries).
void read_sliding_window(const GGUFFile& f, HParams& hp, int64_t def);

// expert_feed_forward_length (default feed_forward_length) into n_ff_expert; call after
// read_expert_hparams.
void read_expert_ff_length(const GGUFFile& f, HParams& hp);

}  // namespace specula
