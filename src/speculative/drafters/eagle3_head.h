// Eagle3Head: an EAGLE-3 draft head (a GGUF of architecture "eagle3", llama.cpp's schema) bound to
// the target model it drafts for, and its forward pass.
//
// The file: `eagle3.target_layers` (or the older `eagle3.extract_layers`): the target layers whose
// input (the residual stream entering layer L, the output of layer L - 1: vLLM's and llama.cpp's
// convention) the head reads, 1..8 of them; `eagle3.target_hidden_size` (default: the head's
// embedding_length), `eagle3.norm_before_residual` (default false) and the usual llama keys
// (embedding_length, feed_forward_length, attention.*, rope.*, block_count 1). Tensors: fc
// [n_layers x target n_embd -> n_embd]; blk.0.attn_norm (the token embedding's norm),
// blk.0.hidden_norm (or blk.0.attn_norm_2: the fused features' norm), blk.0.attn_q/k/v over the
// 2 n_embd concatenation, attn_output, ffn_norm, ffn_gate/up/down; output_norm; optional
// token_embd (else the target's), output (else the target's), rope_freqs, and d2t: one target
// token id per row of the head's output (I64 or I32; absent: the head's vocabulary is the
// target's).
//
// The forward, per row (position p takes token t_{p+1} and g_p, predicting t_{p+2}):
//   g   = fc [f_p(L_1) | f_p(L_2) | ...]   (the encoder: target features), or the head's own
//                                          pre-norm output of the row before (chained drafts)
//   c   = [rms_norm(embed(t)) * attn_norm | rms_norm(g) * hidden_norm]
//   x   = Wo attention(Wq c, Wk c, Wv c) + (norm_before_residual ? the normed g : g)
//   x  += ffn_down(silu(ffn_gate h) * ffn_up h),  h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm), mapped to the target's vocabulary by d2t (the
//   other target tokens -inf); x is the pre-norm hidden state the next chained row takes.
// Rope rotates at absolute positions; the head's own KV cache (one layer) holds its rows.
//
// Load refuses, naming the key or tensor and both files, a head that does not fit the target:
// another hidden size, a layer id outside 1 .. n_layer - 1, a vocabulary without a d2t that maps
// it, a d2t id outside the target's vocabulary, a borrowed token_embd / output of another width.
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

struct Eagle3Head {
    // Throws Error naming the key / tensor, `path` and the target's file when they do not fit.
    static std::unique_ptr<Eagle3Head> load(const std::string& path, const Model& target);

    std::unique_ptr<GGUFFile> file;
    const Model* target = nullptr;
    HParams hp;               // the head's own (n_embd, heads, n_ff, rope, rms_eps)
    std::vector<int> layers;  // the target layers the file names (their inputs), file order
    // SessionParams::capture_layers the target session needs: layers[k] - 1, ascending, distinct;
    // column[k]: where layers[k]'s input sits in a captured row (in units of target n_embd).
    std::vector<int> capture;
    std::vector<int> column;
    int target_embd = 0;  // the target's n_embd (eagle3.target_hidden_size)
    bool norm_before_residual = false;
    WeightView fc, wq, wk, wv, wo, ffn_gate, ffn_up, ffn_down;
    WeightView embed, output;  // the head's own, else the target's
    const float *attn_norm = nullptr, *hidden_norm = nullptr, *ffn_norm = nullptr,
                *output_norm = nullptr;
    std::vector<int32_t> d2t;  // empty: the head's output rows are the target's token ids
    RopeParams rope;
    AttentionShape att;
    ModelWeights owned;                // F32 copies of norms stored in other types
    std::vector<PackedBuffer> packed;  // the head's own matrices repacked (kernels/repack.h)

    int n_out() const { return int(output.rows); }                       // the head's vocabulary
    int n_features() const { return int(layers.size()) * target_embd; }  // fc's input width
};

// One sequence's head state: its KV cache and the buffers of its passes (they only grow).
struct Eagle3State {
    Eagle3State(const Eagle3Head& head, int n_ctx, KVType type_k, KVType type_v);

    KVCache kv;
    MatmulScratch mm;
    std::vector<float> g;       // the rows' fused inputs (n_embd each)
    std::vector<float> hidden;  // the last pass's pre-norm outputs (n_embd per row)
    std::vector<float> logits;  // the last row's logits over the target's vocabulary
    std::vector<float> cat, q, k, v, att, x, h, ff_g, ff_u, cs, scores, out;
};

// g rows = fc features for n rows of Eagle3Head::n_features() floats (`ld` apart) into st.g.
void eagle3_encode(const Eagle3Head& head, Eagle3State& st, const float* features, int64_t ld,
                   int n, ThreadPool& pool);

// One head pass: row t takes tokens[t] and g row t (n_embd floats) at cache position
// st.kv.n_past() + t, rope at absolute position pos0 + t; appends the rows to the head's cache.
// Afterwards st.hidden holds every row's pre-norm output and st.logits the last row's logits
// over the target's vocabulary. Error when the cache would overflow.
void eagle3_decode(const Eagle3Head& head, Eagle3State& st, std::span<const token_id> tokens,
                   const float* g, int pos0, ThreadPool& pool);

}  // namespace specula
