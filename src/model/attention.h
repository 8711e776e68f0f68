// Causal multi-head attention with grouped KV heads over the KV cache. Each (token, head) pair
// is computed independently with the same fixed-order loops (scores over positions 0..pos in
// order, softmax, weighted sum of V rows in order), so a token's output is the same whether it is
// evaluated alone or in a batch. Pairs are spread over the thread pool.
#pragma once

#include "kernels/threadpool.h"
#include "model/kv_cache.h"

namespace specula {

struct AttentionShape {
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim = 0;
    float scale = 1.f;  // 1/sqrt(head_dim)
};

// For t < ntok, the token at position pos0 + t attends to cache rows [0, pos0 + t] of `layer`.
// q and out hold ntok rows of n_head * head_dim floats. `scores` must hold pool.size() * n_ctx
// floats (one row per thread).
void attention(const KVCache& kv, int layer, int pos0, int ntok, const float* q, float* out,
               const AttentionShape& s, ThreadPool& pool, float* scores);

}  // namespace specula
