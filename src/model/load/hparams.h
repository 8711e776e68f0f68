// Hyperparameters: the numbers every block of the forward pass is sized by, and the readers an
// architecture file (model/arch/*.cpp) calls for the `{arch}.*` GGUF keys it uses. Each reader
// applies llama.cpp's default for an absent key and range-checks the value, so the forward pass
// can size its buffers from HParams without further checks; a bad or missing key is an Error
// naming the file and the key.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace specula {

struct HParams {
    std::string arch;  // general.architecture, as the registry names it (model/load/arch.h)
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
    // How the MoE routes (model/blocks/moe.h): softmax over all experts then the top k renormalised
    // (Mixtral, qwen3moe), or the top k logits then a softmax over them (gpt-oss); and the
    // experts' activation: SwiGLU, or gpt-oss's clamped SwiGLU (kernels/ops.h swiglu_oai).
    enum class MoeRouting : uint8_t { SoftmaxTopKNorm, TopKSoftmax };
    enum class MoeAct : uint8_t { SiLU, SwigluOai, Gelu };
    MoeRouting moe_routing = MoeRouting::SoftmaxTopKNorm;
    MoeAct moe_act = MoeAct::SiLU;
    int n_rot = 0;  // rope dimensions (rope.dimension_count, default head_dim)
    bool rope_neox = false;
    float rope_freq_base = 10000.f;
    float rope_freq_scale = 1.f;
    // YaRN (rope.scaling.type = yarn; model/blocks/rope.h, as ggml's rope_yarn): ext_factor 1 mixes
    // extrapolated and interpolated angles over the dimensions between the beta_fast and
    // beta_slow corrections for n_ctx_orig positions. attn_factor multiplies every rotated value
    // (rope.scaling.attn_factor, and an architecture's own magnitude: phi3's LongRoPE, mistral3's
    // yarn_log_multiplier), as ggml's rope does.
    bool rope_yarn = false;
    float rope_attn_factor = 1.f;
    float rope_yarn_beta_fast = 32.f;
    float rope_yarn_beta_slow = 1.f;
    int n_ctx_orig = 0;  // rope.scaling.original_context_length (default n_ctx_train)
    float rms_eps = 1e-5f;
    // Sliding-window attention: in a layer marked in swa_layers a query at position i sees the
    // keys at positions j with 0 <= i - j < n_swa (ik_llama.cpp's mask: masked when
    // i - j >= n_swa), i.e. itself and the n_swa - 1 before it. n_swa = 0: every layer global.
    // Sliding-window layers rotate with their own rope base and scale. (phi3 marks every layer.)
    int n_swa = 0;
    std::vector<uint8_t> swa_layers;  // n_layer flags (empty: none)
    float rope_freq_base_swa = 10000.f;
    float rope_freq_scale_swa = 1.f;
    // Gemma's extras (the defaults are llama's): the attention's scale of q.k (0:
    // 1/sqrt(head_dim); phi3 sets 1 and scales q itself), soft-capping of the attention scores
    // and of the final logits (x = cap tanh(x / cap); 0: none), the embedding rows scaled by
    // embd_scale (0: not scaled), the FFN's activation.
    float attn_scale = 0.f;
    float attn_softcap = 0.f;
    float final_softcap = 0.f;
    float embd_scale = 0.f;
    enum class FfnAct { SiLU, GeluTanh } ffn_act = FfnAct::SiLU;
    // mistral3's temperature (q at position p is multiplied by 1 + attn_temp_scale *
    // log(floor((p + 1) / attn_temp_floor) + 1); 0: none).
    float attn_temp_scale = 0.f;
    int attn_temp_floor = 0;
    // Hybrid models (qwen35): layers marked in recurrent_layers are Gated DeltaNet linear
    // attention (model/state/delta_net.h) with a per-sequence recurrent state
    // (model/state/recurrent_state.h) instead of a KV cache: a causal conv of ssm_d_conv taps over
    // conv_dim channels, then the gated delta rule over ssm_dt_rank value heads of ssm_d_state (the
    // key heads, ssm_n_group of them, as wide). qwen35's full-attention layers double attn_q with
    // an output gate (attn_gated). n_ff_shexp: the shared expert's width (0: none).
    int ssm_d_conv = 0, ssm_d_state = 0, ssm_n_group = 0, ssm_dt_rank = 0;
    std::vector<uint8_t> recurrent_layers;  // n_layer flags (empty: none)
    // The recurrence of the recurrent layers: Gated DeltaNet (qwen35, above), or Mamba-2
    // (nemotron_h; model/state/mamba2.h): a causal conv over ssm_d_inner + 2 ssm_n_group x
    // ssm_d_state channels ([x | B | C]), then the selective scan over ssm_dt_rank heads of
    // ssm_d_inner / ssm_dt_rank channels, each with a state of ssm_d_state per channel.
    enum class SsmKind : uint8_t { DeltaNet, Mamba2 };
    SsmKind ssm_kind = SsmKind::DeltaNet;
    int ssm_d_inner = 0;  // Mamba-2's inner width (ssm.inner_size)
    bool attn_gated = false;
    int n_ff_shexp = 0;
    // IMROPE's sections (rope.dimension_sections; qwen35): text positions rotate every pair but
    // those of the fourth (vision) section, which model/arch/qwen35.cpp leaves unrotated.
    std::vector<int> rope_sections;
    // Layers the file has beyond n_layer: nextn (MTP) layers, which the forward pass skips.
    int n_nextn = 0;
    // DeepSeek's MLA (model/arch/deepseek2.cpp; 0: not MLA): Q through a q_lora_rank latent
    // (0: a plain attn_q), K and V through one kv_lora_rank latent per position, which the cache
    // keeps with the n_rot decoupled rope dims as its one head (head_dim = kv_lora_rank + n_rot);
    // each query head's q.k has mla_head_k dims (nope + rope), its value mla_head_v.
    int mla_kv_lora_rank = 0, mla_q_lora_rank = 0, mla_head_k = 0, mla_head_v = 0;
    // Every layer's V rows are its K rows (MLA: the attention's values are the latent part of the
    // cache row): the cache keeps them once, of K's type (KVLayerShape::v_is_k).
    bool kv_v_is_k = false;
    // DeepSeek-style routing (model/blocks/moe.h): sigmoid instead of softmax gating, the
    // renormalisation of the chosen weights optional, a scale on them, expert groups (the
    // n_group_used groups of the highest top-2 sums compete; 0: none) and the first
    // n_layer_dense_lead layers dense.
    bool moe_sigmoid = false;
    bool moe_norm_w = true;
    float moe_w_scale = 1.f;
    int n_expert_groups = 0, n_group_used = 0;
    int n_layer_dense_lead = 0;
    // Layers of their own shapes (Gemma 4: its full-attention layers have their own head size
    // head_dim, KV head count and rotated dimensions n_rot, the sliding-window ones head_dim_swa
    // and n_rot_swa; some layers a double-wide FFN). Empty arrays: every layer has n_head /
    // n_head_kv / n_ff; head_dim_swa / n_rot_swa 0: head_dim / n_rot.
    std::vector<int> n_head_arr, n_head_kv_arr, n_ff_arr;
    int head_dim_swa = 0, n_rot_swa = 0;
    // KV shared across layers (Gemma 4's attention.shared_kv_layers): layer il attends over the
    // cache of layer kv_src[il] (itself, or for the last layers the last earlier layer of its
    // kind that keeps one) and, when that is another layer, computes no K or V. Empty: each
    // layer its own.
    std::vector<int> kv_src;
    // Sliding-window layers rotate with the global layers' frequency factors (rope_freqs,
    // LongRoPE) unless this is false (Gemma 4: only its full-attention layers have them).
    bool swa_rope_factors = true;
    // Gemma 4's MoE layers run a dense FFN (n_ff wide) beside the experts.
    bool moe_dense_ffn = false;
    // Gemma 4's per-layer inputs: each layer adds a projection of a ple-wide input of its own
    // (model/arch/gemma4.cpp). 0: none.
    int n_embd_per_layer = 0;

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

    bool is_recurrent(int il) const {
        return il >= 0 && static_cast<size_t>(il) < recurrent_layers.size() &&
               recurrent_layers[static_cast<size_t>(il)] != 0;
    }
    int n_recurrent() const {
        int n = 0;
        for (int il = 0; il < n_layer; ++il) n += is_recurrent(il);
        return n;
    }
    int ssm_key_dim() const { return ssm_d_state * ssm_n_group; }
    // The recurrent output's width per row: DeltaNet's value heads, Mamba-2's inner width.
    int ssm_value_dim() const {
        return ssm_kind == SsmKind::Mamba2 ? ssm_d_inner : ssm_d_state * ssm_dt_rank;
    }
    // The conv's channels: DeltaNet's [q | k | v], Mamba-2's [x | B | C].
    int ssm_conv_dim() const {
        return ssm_kind == SsmKind::Mamba2 ? ssm_d_inner + 2 * ssm_key_dim()
                                           : 2 * ssm_key_dim() + ssm_value_dim();
    }

    int n_embd_q() const { return n_head * head_dim; }      // width of Q and of the attention out
    int n_embd_kv() const { return n_head_kv * head_dim; }  // width of K and V (one cache row)

    // Layer il's shapes (the uniform ones above when the model has no per-layer shapes).
    int layer_n_head(int il) const { return at(n_head_arr, il, n_head); }
    int layer_n_head_kv(int il) const { return at(n_head_kv_arr, il, n_head_kv); }
    int layer_n_ff(int il) const { return at(n_ff_arr, il, n_ff); }
    int layer_head_dim(int il) const {
        return is_swa(il) && head_dim_swa ? head_dim_swa : head_dim;
    }
    int layer_n_rot(int il) const { return is_swa(il) && n_rot_swa ? n_rot_swa : n_rot; }
    int layer_n_embd_q(int il) const { return layer_n_head(il) * layer_head_dim(il); }
    int layer_n_embd_kv(int il) const { return layer_n_head_kv(il) * layer_head_dim(il); }
    // The layer whose cache layer il reads (itself unless it shares another's).
    int kv_layer(int il) const { return at(kv_src, il, il); }
    bool own_kv(int il) const { return kv_layer(il) == il; }
    // The largest of each over the layers (what the pass's buffers are sized by).
    int max_n_embd_q() const {
        return max_over([&](int il) { return layer_n_embd_q(il); });
    }
    int max_n_embd_kv() const {
        return max_over([&](int il) { return layer_n_embd_kv(il); });
    }
    int max_n_ff() const {
        return max_over([&](int il) { return layer_n_ff(il); });
    }
    int max_head_dim() const {
        return max_over([&](int il) { return layer_head_dim(il); });
    }
    int max_n_rot() const { return std::max(n_rot, n_rot_swa); }

  private:
    static int at(const std::vector<int>& v, int il, int def) {
        return il >= 0 && size_t(il) < v.size() ? v[size_t(il)] : def;
    }
    template <class F>
    int max_over(F f) const {
        int m = 0;
        for (int il = 0; il < std::max(n_layer, 1); ++il) m = std::max(m, f(il));
        return m;
    }
};

// The readers take the key prefix `{arch}.` (hp.arch + ".") from hp.arch.

// context_length, embedding_length, block_count, feed_forward_length and
// attention.layer_norm_rms_epsilon (default 1e-5). `per_layer`: feed_forward_length may be an
// array of block_count values (HParams::n_ff_arr; n_ff their largest).
void read_base_hparams(const GGUFFile& f, HParams& hp, bool per_layer = false);

// attention.head_count, attention.head_count_kv (default head_count), attention.key_length
// (default n_embd / n_head) and attention.value_length (must equal key_length). `per_layer`:
// the head counts may be arrays of block_count values (HParams::n_head_arr / n_head_kv_arr;
// n_head / n_head_kv their largest).
void read_attention_hparams(const GGUFFile& f, HParams& hp, bool per_layer = false);

// rope.dimension_count (default head_dim), rope.freq_base (default 10000), the scaling
// (rope.scaling.type none / linear, and yarn where `allow_yarn`; rope.scaling.factor or the
// older rope.scale_linear), rope.scaling.original_context_length (default context_length) and
// rope.scaling.attn_factor (default 1), as ik_llama.cpp reads them for every architecture (the
// YaRN betas keep their defaults 32 / 1: an architecture that reads them does so itself). Needs
// the attention hparams first (the rotated dimensions must fit in a head).
void read_rope_hparams(const GGUFFile& f, HParams& hp, bool allow_yarn = true);

// expert_count and expert_used_count (0: a dense FFN); n_ff_expert = n_ff.
void read_expert_hparams(const GGUFFile& f, HParams& hp);

// attention.sliding_window into n_swa (default `def`; def < 0: required), >= 1. Sets no layer
// flags: the architecture marks swa_layers (n_layer entries).
void read_sliding_window(const GGUFFile& f, HParams& hp, int64_t def);

// expert_feed_forward_length (default feed_forward_length) into n_ff_expert; call after
// read_expert_hparams.
void read_expert_ff_length(const GGUFFile& f, HParams& hp);

}  // namespace specula
