// Causal multi-head attention with grouped KV heads over the KV cache, optionally within a sliding
// window. Each (token, head) pair is computed with the same fixed-order loops (scores over its
// visible positions in order, softmax,
// weighted sum of V rows in order), so a token's output is the same whether it is evaluated alone
// or in a batch (a sliding window only narrows the positions each query loops over). With AVX-512
// and a head size that is a multiple of 16, or AVX2 and one of 8 (up to 128), blocks of up to 16
// queries (consecutive positions x the query heads sharing a KV head) share each K and V row load
// (kernels/attention.h); otherwise pairs go one by one. Work is spread over the pool.
#pragma once

#include <cstddef>

#include "common/threadpool.h"
#include "model/state/kv_cache.h"

namespace specula {

struct AttentionShape {
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim = 0;
    float scale = 1.f;  // 1/sqrt(head_dim)
    // Sliding window: the token at position p sees cache rows [max(0, p - window + 1), p]
    // (HParams::n_swa's rule). 0: rows [0, p].
    int window = 0;
    // Scores soft-capped before the softmax: cap * tanh(score / cap) (gemma2). 0: none.
    float softcap = 0.f;
    // Attention sinks (gpt-oss): one logit per query head added to the softmax's denominator
    // (ops.h softmax_sink); null: none.
    const float* sinks = nullptr;
};

// The first cache row the token at `pos` sees under `window` (0: no window).
inline int first_visible(int pos, int window) {
    return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

// The floats attention() needs in `scores` for a cache of n_ctx rows and n_threads threads.
size_t attention_scratch_floats(const AttentionShape& s, int n_ctx, int n_threads);

// For t < ntok, the token at position pos0 + t attends to cache rows
// [first_visible(pos0 + t, s.window), pos0 + t] of `layer`.
// q and out hold ntok rows of n_head * head_dim floats. `scores` must hold
// attention_scratch_floats(s, kv.n_ctx(), pool.size()) floats.
void attention(const KVCache& kv, int layer, int pos0, int ntok, const float* q, float* out,
               const AttentionShape& s, ThreadPool& pool, float* scores);

}  // namespace specula
