// A loaded model (weights mapped from GGUF, hyperparameters, tokenizer) and a Session that
// evaluates it with a KV cache.
//
// Architectures: "llama" (GQA, tied embeddings, Llama 3 rope_freqs, Mistral, Mixtral-style MoE
// via ffn_gate_inp / *_exps) and "qwen2" (q/k/v biases, NEOX rope).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "tokenizer/tokenizer.h"

namespace specula {

enum class Arch { Llama, Qwen2 };
const char* arch_name(Arch a);

struct HParams {
    Arch arch = Arch::Llama;
    int n_vocab = 0;
    int n_ctx_train = 0;
    int n_embd = 0;
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim = 0;     // n_embd / n_head unless the file says otherwise
    int n_ff = 0;
    int n_expert = 0;     // 0: dense FFN
    int n_expert_used = 0;
    int n_rot = 0;        // rope dimensions (rope.dimension_count, default head_dim)
    bool rope_neox = false;
    float rope_freq_base = 10000.f;
    float rope_freq_scale = 1.f;
    float rms_eps = 1e-5f;
};

struct LayerWeights {
    const float* attn_norm = nullptr;
    WeightView wq, wk, wv, wo;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // qwen2
    const float* ffn_norm = nullptr;
    WeightView ffn_gate, ffn_up, ffn_down;       // dense
    const float* ffn_gate_inp = nullptr;         // MoE router [n_embd x n_expert], F32
    WeightView ffn_gate_exps, ffn_up_exps, ffn_down_exps;  // MoE: rows = n_expert * per-expert
};

class Model {
public:
    // Loads a GGUF file. Throws Error for unsupported architectures (naming the supported ones),
    // missing or misshapen tensors, and bad metadata.
    static std::unique_ptr<Model> load(const std::string& path);

    const HParams& hparams() const { return hp_; }
    const Tokenizer& tokenizer() const { return *tok_; }
    const GGUFFile& file() const { return *file_; }
    int64_t n_params() const;
    std::string describe() const;  // one line: arch, size, file type

    // Weights (public to the forward pass in model/).
    WeightView tok_embd, output;
    const float* output_norm = nullptr;
    std::vector<LayerWeights> layers;
    std::vector<float> rope_freq_factors;  // Llama 3 rope_freqs, empty if none
    std::vector<std::vector<float>> owned;  // F32 copies made at load (norms of other types)

private:
    HParams hp_;
    std::unique_ptr<GGUFFile> file_;
    std::unique_ptr<Tokenizer> tok_;
};

struct SessionParams {
    int n_ctx = 0;      // 0: the model's training context
    int n_threads = 0;  // 0: hardware concurrency
};

// One sequence's state: KV cache and the logits of the last eval. Not thread-safe; many sessions
// may share one Model.
class Session {
public:
    Session(const Model& model, const SessionParams& params);
    ~Session();

    // Evaluates tokens at positions n_past() .. n_past()+n-1 in ONE pass (each weight streamed
    // once for all of them) and appends them to the cache. Afterwards logits(i) holds the n_vocab
    // logits after token i. A position's logits do not depend on how many tokens shared the pass.
    // Throws Error if the context would overflow (naming n_ctx).
    void eval(std::span<const token_id> tokens);

    const float* logits(int i) const;
    int n_logits() const;  // tokens of the last eval
    int n_past() const;
    int n_ctx() const;
    // Drops cache entries at positions >= n_past (speculative rollback). n_past <= n_past().
    void rollback(int n_past);
    void reset() { rollback(0); }

    const Model& model() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace specula
