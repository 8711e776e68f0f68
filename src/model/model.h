// A loaded model (weights mapped from GGUF, hyperparameters, tokenizer) and a Session that
// evaluates it with a KV cache, numerically following llama.cpp's CPU graph.
//
// Architectures: "llama" (GQA, tied embeddings, Llama 3 rope_freqs, Mistral, Mixtral-style MoE
// via ffn_gate_inp / *_exps) and "qwen2" (q/k/v biases, NEOX rope).
//
// Promises:
//  - Model::load validates every tensor it uses (presence, shape, supported type) and throws
//    specula::Error naming the file and tensor/key at fault; it never reads outside the file.
//  - Session::eval is batch invariant: the logits of a position are bit-identical whether its
//    token was evaluated alone or together with others, so speculative verification can run a
//    whole draft in one pass.
//  - After warm-up (the first eval of the largest batch size) eval allocates nothing.
//  - Several sessions of one model can be evaluated in ONE pass (model/batch_eval.h); a
//    sequence's logits are bit-identical to evaluating it alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"
#include "model/kv_cache.h"
#include "model/offload.h"
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
    int head_dim = 0;  // n_embd / n_head unless the file says otherwise
    int n_ff = 0;
    int n_expert = 0;  // 0: dense FFN
    int n_expert_used = 0;
    int n_rot = 0;  // rope dimensions (rope.dimension_count, default head_dim)
    bool rope_neox = false;
    float rope_freq_base = 10000.f;
    float rope_freq_scale = 1.f;
    float rms_eps = 1e-5f;

    int n_embd_q() const { return n_head * head_dim; }      // width of Q and of the attention out
    int n_embd_kv() const { return n_head_kv * head_dim; }  // width of K and V (one cache row)
};

// Reads and checks the `{arch}.*` hyperparameters of `f`; n_vocab is given by the caller (the
// tokenizer's size). Throws Error naming the key for missing or out-of-range values and for an
// unsupported architecture.
HParams read_hparams(const GGUFFile& f, int n_vocab);

struct LayerWeights {
    const float* attn_norm = nullptr;
    WeightView wq, wk, wv, wo;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // qwen2 (optional for llama)
    const float* bo = nullptr;                                // optional attn_output bias
    const float* ffn_norm = nullptr;
    WeightView ffn_gate, ffn_up, ffn_down;                 // dense
    const float* ffn_gate_inp = nullptr;                   // MoE router [n_embd x n_expert], F32
    WeightView ffn_gate_exps, ffn_up_exps, ffn_down_exps;  // MoE: rows = n_expert * per-expert
};

class Model {
  public:
    // Loads a GGUF file. Throws Error for unsupported architectures (naming the supported ones),
    // missing or misshapen tensors, and bad metadata. The weights are repacked on n_threads
    // threads (0: the hardware threads; see pack_weights).
    static std::unique_ptr<Model> load(const std::string& path, int n_threads = 0);

    const HParams& hparams() const { return hp_; }
    const Tokenizer& tokenizer() const { return *tok_; }
    const GGUFFile& file() const { return *file_; }
    int64_t n_params() const;
    // Weight bytes one decode step streams: every layer matrix and the output matrix (only the
    // n_expert_used experts' share of MoE expert matrices; the embedding table is only indexed).
    // bytes / (seconds per token) is the weight bandwidth a decode step achieves.
    int64_t bytes_per_token() const;
    std::string describe() const;  // one line: arch, size, file type

    // Weights (public to the forward pass in model/).
    WeightView tok_embd, output;
    const float* output_norm = nullptr;
    std::vector<LayerWeights> layers;
    std::vector<float> rope_freq_factors;   // Llama 3 rope_freqs, empty if none
    std::vector<std::vector<float>> owned;  // F32 copies made at load (norms of other types)
    std::vector<PackedBuffer> packed;       // repacked matrices (pack_weights), W.packed points in
    // Where Sessions of this model run their layers unless SessionParams says otherwise
    // (model/offload.h; the CLI's -ngl / -ngld / --device set it after load). n_ctx is unused.
    OffloadParams offload;

  private:
    HParams hp_;
    std::unique_ptr<GGUFFile> file_;
    std::unique_ptr<Tokenizer> tok_;
};

// Repacks the dense matrices of repackable types (kernels/repack.h: Q8_0, Q4_K, Q6_K; F16 and
// BF16 unless SPECULA_REPACK_FLOAT=0) into the tiled layout the multi-token kernels want, and
// releases the mapped pages of their originals, so resident memory stays that of the file. The
// token embedding keeps its row layout (get_rows reads it); a tied output matrix gets a packed
// copy. MoE expert matrices keep the row layout. Model::load calls it unless SPECULA_REPACK=0. It
// runs on n_threads threads (0: the hardware threads).
void pack_weights(Model& m, int n_threads = 0);

struct SessionParams {
    int n_ctx = 0;      // 0: the model's training context, capped at kDefaultMaxCtx
    int n_threads = 0;  // 0: hardware concurrency (unused with `pool`)
    // The KV cache's types (-ctk / -ctv). llama.cpp's default is F16; sessions made in code keep
    // F32 unless they ask.
    KVType type_k = KVType::F32;
    KVType type_v = KVType::F32;
    // A pool shared with other sessions (not owned; it must outlive the session). Sessions that
    // share one must not eval from two threads at once; model/batch_eval.h evaluates several of
    // them in one pass. Null: the session owns a pool of n_threads.
    ThreadPool* pool = nullptr;
    // Layers [0, n_gpu_layers) run on a Vulkan device (model/offload.h); all of them and the
    // output head when n_gpu_layers >= n_layer. 0: everything on the CPU.
    // -1: the model's default (Model::offload, which -ngl / -ngld set).
    int n_gpu_layers = -1;
    int gpu_device = -1;  // Vulkan device index when n_gpu_layers >= 0 (-1: pick one)

    // The KV cache is preallocated for the whole context, so a default context is capped
    // (Llama 3 trains at 128k positions: ~8 GB of cache for a 1B model).
    static constexpr int kDefaultMaxCtx = 4096;
};

// One sequence's state: KV cache and the logits of the last eval. Not thread-safe; many sessions
// may share one Model.
class Session {
  public:
    Session(const Model& model, const SessionParams& params);
    ~Session();
    Session(Session&&) noexcept;
    Session& operator=(Session&&) noexcept;

    // Evaluates tokens at positions n_past() .. n_past()+n-1 in ONE pass (each weight streamed
    // once for all of them) and appends them to the cache. Afterwards logits(i) holds the n_vocab
    // logits after token i. A position's logits do not depend on how many tokens shared the pass.
    // Throws Error if the context would overflow (naming n_ctx) or a token id is out of range;
    // the session is unchanged then.
    // With all_logits = false only the last token's logits are computed (n_logits() == 1,
    // logits(0) is the last token's): a prompt then skips the n_vocab-wide output matmul for
    // every other position. That row is bit-identical to the all_logits one.
    void eval(std::span<const token_id> tokens, bool all_logits = true);

    const float* logits(int i) const;
    int n_logits() const;  // tokens of the last eval
    int n_past() const;
    int n_ctx() const;
    int n_threads() const;
    // Layers this session runs on a device (0: all on the CPU; model/offload.h).
    int n_gpu_layers() const;
    // Drops cache entries at positions >= n_past (speculative rollback). n_past <= n_past().
    // The logits of the last eval stay readable (a verifier samples from them after rollback).
    void rollback(int n_past);
    void reset() { rollback(0); }

    const Model& model() const;

    struct Impl;  // model/forward_pass.h

  private:
    friend class BatchEvaluator;  // model/batch_eval.h: one pass over several sessions
    std::unique_ptr<Impl> impl_;
};

}  // namespace specula
