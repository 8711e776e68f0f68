// Mixtral-style mixture-of-experts FFN, as llama.cpp's llm_build_moe_ffn with softmax gating and
// normalised weights: router logits = W_inp x (F32), softmax over experts, the n_expert_used
// most probable experts, their probabilities renormalised to sum 1, and
// out = sum_k w_k * down_k(silu(gate_k(x)) * up_k(x)), summed in rank order.
// Used by llama (Mixtral) and qwen3moe; each expert's FFN is hp.n_ff_expert wide.
// gpt-oss (HParams::moe_routing / moe_act, and the biases LayerWeights has): logits = W_inp x +
// b, the top k logits, their softmax as the weights, and each expert
// down_k(swiglu_oai(gate_k x + bg, up_k x + bu)) + bd.
// Gemma 4 (MoeAct::Gelu and the LayerWeights it has): the router reads its own input (forward's
// router_x), each expert's gate and up come fused (ffn_gate_up_exps) with gelu, and each chosen
// expert's weight is multiplied by its output scale (ffn_down_exps_s) after the renormalisation.
// The pass's tokens are grouped by expert: each expert a token chose runs once per forward, one
// matmul per weight over all its tokens (so its weights are read once per pass, however many
// tokens chose it); since matmul results are per-token, a token's output does not depend on the
// batch.
#pragma once

#include <vector>

#include "kernels/matmul.h"
#include "model/load/hparams.h"
#include "model/load/weights.h"

namespace specula {

class MoeFFN {
  public:
    // Sizes the buffers for up to `ntok` tokens (allocates only when growing).
    void reserve(const HParams& hp, int ntok);
    // What reserve(hp, ntok) allocates, and what this holds now, in bytes.
    static double bytes(const HParams& hp, int ntok);
    double allocated_bytes() const;

    // out[t * n_embd ...] = MoE(x[t * n_embd ...]) for t < ntok; the router reads router_x's rows
    // instead of x's where given.
    void forward(const LayerWeights& l, const HParams& hp, const float* x, int ntok, float* out,
                 ThreadPool& pool, MatmulScratch& scratch, const float* router_x = nullptr);

    // Experts the last forward ran (each once, over every token that chose it).
    int experts_run() const { return experts_run_; }

  private:
    template <class M, class F>
    friend void each_moe_buffer(M& m, const HParams& hp, int ntok, F&& f);
    void route(const LayerWeights& l, const HParams& hp, const float* x, int ntok, ThreadPool& pool,
               MatmulScratch& scratch);
    // Runs expert e over the tokens that chose it; false (nothing read) when none did.
    bool run_expert(const LayerWeights& l, const HParams& hp, int e, const float* x, int ntok,
                    ThreadPool& pool, MatmulScratch& scratch);
    // A one-token pass: its k experts' gate and up rows in one matmul_multi (they share the
    // input: bit-identical to one call per expert, one pool barrier instead of k), then each
    // expert's down rows.
    void run_one_token(const LayerWeights& l, const HParams& hp, const float* x, ThreadPool& pool,
                       MatmulScratch& scratch);

    std::vector<float> logits_;          // [ntok][n_expert]
    std::vector<int> sel_;               // [ntok][n_used] chosen experts, most probable first
    std::vector<float> w_;               // [ntok][n_used] their normalised weights
    std::vector<int> slots_;             // rows routed to the current expert: t * n_used + rank
    std::vector<float> xg_, g_, u_, d_;  // gathered inputs and the expert's intermediates
    std::vector<float> eo_;              // [ntok][n_used][n_embd] expert outputs
    std::vector<float> score_;           // [n_expert] one token's selection scores
    std::vector<MatmulJob> jobs_;        // run_one_token's gate and up weights
    int experts_run_ = 0;
};

}  // namespace specula
