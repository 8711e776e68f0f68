// DFlashHead: a DFlash block drafter (a GGUF of architecture "dflash-draft", ik_llama.cpp's
// schema) bound to the target model it drafts for, and its forward pass.
//
// The file: `dflash-draft.dflash.block_size` B (> 1: one pass proposes up to B - 1 tokens),
// `.dflash.mask_token_id` (the token of the block's masked rows), `.dflash.target_layer_ids` (1..8
// distinct target layers whose outputs, the residual stream after layer L, feed the drafter),
// `.dflash.n_target_features` (their count x the target's hidden size),
// `.dflash.backbone_rotary_base` (the rope base of the context keys; absent or 0: the drafter's own
// rope.freq_base) and the llama keys (embedding_length, block_count, feed_forward_length,
// attention.*, rope.freq_base). Tensors: dflash_fc [n_target_features -> n_embd],
// dflash_hidden_norm, output_norm; per layer attn_norm, attn_q / k / v, attn_q_norm / attn_k_norm
// (per head), attn_output, post_attention_norm (the FFN's input norm), ffn_gate / up / down;
// optional token_embd and output (else the target's, as the published drafters share them).
//
// The forward. Context: every target position p the drafter sees gives
//   c_p = rms_norm(dflash_fc [f_p(L_1) | f_p(L_2) | ...]) * dflash_hidden_norm
// and, per layer, a key k_norm(Wk c_p) roped at p with the backbone's base and a value Wv c_p,
// kept in the drafter's cache (computed once per position). Block: after the history t_0 .. t_L
// (the target has evaluated up to t_{L-1}), rows [t_L, mask x K] at positions L .. L + K; per layer
//   h = rms_norm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h (q, k normed per head, roped)
//   x += Wo attention(q; the last kCrossCtx context keys and every block row: no causal mask)
//   x += ffn_down(silu(ffn_gate u) * ffn_up u),  u = rms_norm(x) * post_attention_norm
// and logits = output(rms_norm(x) * output_norm) for the K mask rows: row i proposes d_{i+1}.
// Rope is NEOX (split halves) at absolute positions, as ik_llama.cpp rotates dflash-draft.
//
// Load refuses, naming the key or tensor and both files, a drafter that does not fit the target:
// block size below 2, a layer id outside 0 .. n_layer - 2 (the target's last layer keeps only its
// output rows) or listed twice, n_target_features other than the layers x the target's hidden size,
// another hidden size or vocabulary, a mask token outside the vocabulary; and the variants this
// forward does not run (Laguna, DSpark heads, sliding windows, attention biases or sinks).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/threadpool.h"
#include "kernels/repack.h"
#include "model/blocks/attention.h"
#include "model/blocks/rope.h"
#include "model/load/model.h"
#include "model/state/kv_cache.h"

namespace specula {

struct DFlashLayer {
    WeightView wq, wk, wv, wo, ffn_gate, ffn_up, ffn_down;
    const float *attn_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr, *post_norm = nullptr;
};

struct DFlashHead {
    // The context rows a block attends to (ik_llama.cpp's default cross_ctx): the latest ones.
    static constexpr int kCrossCtx = 512;

    // Throws Error naming the key / tensor, `path` and the target's file when they do not fit.
    static std::unique_ptr<DFlashHead> load(const std::string& path, const Model& target);

    std::unique_ptr<GGUFFile> file;
    const Model* target = nullptr;
    HParams hp;               // the drafter's own (n_embd, heads, n_ff, rope, rms_eps)
    int block_size = 0;       // B: a pass proposes up to B - 1 tokens
    token_id mask_token = 0;  // the masked rows' token
    std::vector<int> layers;  // the target layers the file names, file order
    // SessionParams::capture_layers the target session needs (layers, ascending); column[k]: where
    // layers[k]'s output sits in a captured row (in units of the target's n_embd).
    std::vector<int> capture;
    std::vector<int> column;
    WeightView fc;
    const float *hidden_norm = nullptr, *output_norm = nullptr;
    std::vector<DFlashLayer> blk;
    WeightView embed, output;  // the drafter's own, else the target's
    RopeParams rope;           // the block's queries and keys
    RopeParams rope_ctx;       // the context keys (the backbone's base)
    AttentionShape att;
    ModelWeights owned;                // F32 copies of norms stored in other types
    std::vector<PackedBuffer> packed;  // the drafter's own matrices repacked (kernels/repack.h)

    int n_features() const { return int(layers.size()) * target->hparams().n_embd; }
};

// One sequence's drafter state: its cache (context rows, then a block's rows while it runs) and
// the buffers of its passes (they only grow).
struct DFlashState {
    DFlashState(const DFlashHead& head, int n_ctx, KVType type_k, KVType type_v);

    KVCache kv;
    MatmulScratch mm;
    std::vector<float> logits;  // the last block's mask rows, n_vocab each
    std::vector<float> c, x, h, q, k, v, att, out, ff_g, ff_u, cs, scores;
};

// Appends context rows to st.kv: row t is the target position pos0 + t (token tokens[t]) with
// n_features() floats of `features` (`ld` apart).
void dflash_context(const DFlashHead& head, DFlashState& st, std::span<const token_id> tokens,
                    const float* features, int64_t ld, int pos0, ThreadPool& pool);

// One block pass after the cached context: rows [last, mask x n_mask] at positions pos0 ..; the
// block's rows leave the cache afterwards. st.logits holds the n_mask rows' logits over the
// target's vocabulary. Error when the cache would overflow.
void dflash_block(const DFlashHead& head, DFlashState& st, token_id last, int n_mask, int pos0,
                  ThreadPool& pool);

}  // namespace specula
