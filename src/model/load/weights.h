// The weights of a model as the forward pass reads them, and the binder an architecture file
// (model/arch/*.cpp) names its tensors through. Binding checks every tensor's presence, shape
// (ggml order, ne[0] first) and type before the forward pass may use it; an Error names the file
// and the tensor. Matrices are views of the mapped file; small vectors (norms, biases, the MoE
// router) are F32, dequantized into copies the model owns when the file stores another type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/load/hparams.h"

namespace specula {

// One layer's tensors; a null pointer / empty view is a tensor this layer does not have.
struct LayerWeights {
    const float* attn_norm = nullptr;
    WeightView wq, wk, wv, wo;
    WeightView wqkv;  // fused Q/K/V (phi3): rows [Q | K | V], used instead of wq, wk, wv
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // Q/K/V biases (qwen2)
    const float* bo = nullptr;                                // attn_output bias
    const float *q_norm = nullptr, *k_norm = nullptr;  // per-head Q/K RMSNorm [head_dim] (qwen3)
    // RMSNorm of the attention output and of the FFN output before the residual add (gemma2/3).
    const float *attn_post_norm = nullptr, *ffn_post_norm = nullptr;
    const float* ffn_norm = nullptr;
    WeightView ffn_gate, ffn_up, ffn_down;  // dense
    WeightView ffn_gate_up;  // fused gate/up (phi3's ffn_up): rows [gate | up], 2 * n_ff
    const float* ffn_gate_inp = nullptr;                   // MoE router [n_embd x n_expert], F32
    WeightView ffn_gate_exps, ffn_up_exps, ffn_down_exps;  // MoE: rows = n_expert * per-expert
    // gpt-oss: attention sinks [n_head], the router bias [n_expert] and the experts' biases
    // ([n_expert][n_ff_expert] for gate and up, [n_expert][n_embd] for down).
    const float* attn_sinks = nullptr;
    const float* ffn_gate_inp_b = nullptr;
    const float *ffn_gate_exps_b = nullptr, *ffn_up_exps_b = nullptr, *ffn_down_exps_b = nullptr;
    // The shared expert (qwen35moe): a SwiGLU FFN beside the routed ones, its output scaled by
    // sigmoid(ffn_gate_inp_shexp . h) ([n_embd], F32).
    WeightView ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
    const float* ffn_gate_inp_shexp = nullptr;
    // DeepSeek's MLA: q_a [n_embd -> q_lora] with its norm and q_b [q_lora -> n_head * head_k]
    // (else wq), kv_a_mqa [n_embd -> kv_lora + n_rot] with kv_a_norm [kv_lora], and kv_b
    // [kv_lora -> n_head * (nope + head_v)]; the router's selection bias exp_probs_b [n_expert].
    WeightView wq_a, wq_b, wkv_a_mqa, wkv_b;
    // Made at load from kv_b, each a stack of n_head matrices (stack_slice(w, h, n_head), packed
    // where each is whole tiles): wk_b_t, head h's K rows transposed [nope -> kv_lora] (Q8_0 where
    // kv_b is quantized, as ik_llama.cpp requantizes them, else F32), and wv_b, head h's V rows
    // [kv_lora -> head_v] (kv_b's type).
    WeightView wk_b_t, wv_b;
    const float *q_a_norm = nullptr, *kv_a_norm = nullptr, *ffn_exp_probs_b = nullptr;
    // Gated DeltaNet (qwen35's recurrent layers, HParams::is_recurrent): the mixed Q/K/V input of
    // the conv (attn_qkv, conv_dim rows), the output gate z (attn_gate, value_dim rows), the
    // conv taps [conv_dim][d_conv] (F32), the decay's dt bias and A (ssm_a, negative), the beta
    // and alpha projections (dt_rank rows each), the per-head output norm [d_state] and ssm_out.
    WeightView ssm_qkv, ssm_gate, ssm_beta, ssm_alpha, ssm_out;
    const float *ssm_conv1d = nullptr, *ssm_dt = nullptr, *ssm_a = nullptr, *ssm_norm = nullptr;
    // Mamba-2 (nemotron_h's recurrent layers; the conv taps, dt bias, A, ssm_norm and ssm_out
    // above): the fused input projection ssm_in (rows [z | x B C | dt]: 2 d_inner + 2 n_group
    // d_state + n_head), the conv's bias [conv_dim] and the skip D [n_head].
    WeightView ssm_in;
    const float *ssm_conv1d_b = nullptr, *ssm_d = nullptr;
    // Gemma 4: the layer's output scale (one value), and its per-layer input's gate
    // [n_embd -> ple], projection [ple -> n_embd] and output norm.
    const float* out_scale = nullptr;
    // Gemma 4's MoE: the experts' gate and up fused per expert (rows [gate | up], 2 n_ff_expert
    // each), a scale per expert's output [n_expert], the router's input scale [n_embd] (the
    // router reads rms_norm(x) * it), and the norms around the two branches.
    WeightView ffn_gate_up_exps;
    const float *ffn_down_exps_s = nullptr, *ffn_gate_inp_s = nullptr;
    const float *ffn_pre_norm_2 = nullptr, *ffn_post_norm_1 = nullptr, *ffn_post_norm_2 = nullptr;
    WeightView ple_gate, ple_proj;
    const float* ple_post_norm = nullptr;
};

// The MTP (multi-token prediction, "nextn") head some files ship after their last layer (qwen35:
// blk.N.nextn.*, N = block_count - 1): x = eh_proj [enorm(embed(t_{p+1})) | hnorm(h_p)], one
// gated full-attention layer with its own KV cache (its FFN optional: absent in Qwen3.5's small
// models), then logits = head(rms_norm(x) * shared_head_norm). h_p is the main pass's final
// hidden state after the output norm; k > 1 drafts chain the head on its own output after
// shared_head_norm (both as ik_llama.cpp and vLLM do: tests/model/test_mtp_parity.cpp).
struct MtpWeights {
    LayerWeights layer;
    WeightView eh_proj;  // [2 n_embd -> n_embd]
    const float *enorm = nullptr, *hnorm = nullptr;
    const float* shared_head_norm = nullptr;  // absent: the model's output_norm
    WeightView head;   // shared_head_head, else output_extra (ik_llama.cpp's), else the output
    WeightView embed;  // nextn.embed_tokens, else token_embd
};

struct ModelWeights {
    WeightView tok_embd, output;
    const float* output_norm = nullptr;
    std::vector<LayerWeights> layers;
    std::vector<float> rope_freq_factors;  // Llama 3 rope_freqs, empty if none
    // LongRoPE (phi3 rope_factors_long / _short, empty if none): a session whose context
    // exceeds hp.n_ctx_orig uses the long factors, any other the short (rope_freqs wins).
    std::vector<float> rope_factors_long, rope_factors_short;
    // Copies made at load: F32 (norms of other types) or, in a float vector's storage, the bytes
    // of a quantized matrix (MLA's per-head stacks).
    std::vector<std::vector<float>> owned;
    MtpWeights mtp;  // eh_proj empty: the file has no MTP head
    // Gemma 4's per-layer inputs: per token n_layer x ple values, and the projection of the
    // embedding added to them (model/arch/gemma4.cpp). Empty: none.
    WeightView tok_embd_per_layer, per_layer_model_proj;
    const float* per_layer_proj_norm = nullptr;
    bool has_mtp() const { return mtp.eh_proj.data != nullptr; }
};

enum class Need { Required, Optional };

// Binds tensors of `f` by name; F32 copies go to w.owned.
class TensorBinder {
  public:
    TensorBinder(const GGUFFile& f, ModelWeights& w) : f_(f), w_(w) {}

    // A matrix of `rows` rows of `cols` elements; ne = [cols, rows] or [cols, rows/k, k]
    // (experts). Empty when absent and optional.
    WeightView matrix(const std::string& name, const std::vector<int64_t>& ne,
                      Need need = Need::Required);
    // An F32 vector of n elements (null when absent and optional).
    const float* vector(const std::string& name, int64_t n, Need need = Need::Required);
    // Any small tensor as F32 values (mapped when F32, else dequantized row by row).
    const float* floats(const std::string& name, const std::vector<int64_t>& ne,
                        Need need = Need::Required);
    // The file's path (for an architecture's own errors).
    const std::string& path() const { return f_.path(); }

  private:
    const GGUFTensor* get(const std::string& name, const std::vector<int64_t>& ne, Need need);
    void check_rows(const std::string& name, const GGUFTensor& t);

    const GGUFFile& f_;
    ModelWeights& w_;
};

// The shared bindings architecture files are made of. `pre` is the layer's "blk.N." prefix.

// token_embd, output_norm, output (absent: tied to token_embd) and rope_freqs (optional, Llama 3).
void bind_io(TensorBinder& b, const HParams& hp, ModelWeights& w);

// attn_norm, attn_q/k/v/output weights, and the Q/K/V biases (`qkv_bias` says whether they are
// required) and the optional attn_output bias.
void bind_attention(TensorBinder& b, const HParams& hp, const std::string& pre, Need qkv_bias,
                    LayerWeights& l);

// attn_q_norm and attn_k_norm, one weight of head_dim per layer shared by every head (qwen3).
void bind_qk_norm(TensorBinder& b, const HParams& hp, const std::string& pre, LayerWeights& l);

// ffn_norm and either ffn_gate/up/down (hp.n_expert == 0) or the router ffn_gate_inp and the
// stacked experts ffn_{gate,up,down}_exps
// (each expert's FFN width is hp.n_ff_expert).
void bind_ffn(TensorBinder& b, const HParams& hp, const std::string& pre, LayerWeights& l);

// post_attention_norm and post_ffw_norm (gemma2/3), n_embd each.
void bind_post_norms(TensorBinder& b, const HParams& hp, const std::string& pre, LayerWeights& l);

// "blk.<il>."
std::string layer_prefix(int il);

}  // namespace specula
