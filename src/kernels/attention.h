// The attention kernels the table holds (kernels/table.h's AttentionEntry: q.k dot products, the
// weighted sum of V rows, the KV cache's row conversions, and these blocked kernels), for
// model/attention.cpp's attention block. Every ISA's kernels use a fixed summation order, so a
// process's results never depend on the batch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula {

// Blocked attention: many queries (positions, and the query heads of one KV head) against the
// same K / V rows, each row loaded once per block. K and V rows are `stride` floats apart.
//   qk: s[i][j] = scale * dot(q[i], K row j) for j in [j0, j1), i < nq
//   pv: out[i] += sum of p[i][j] * V row j over j in [j0, j1) in order, i < nq
// A query's results do not depend on nq or on how [0, n) is split into [j0, j1) ranges.
// AttentionEntry::blocked(head_dim, &k) fills them for head_dim (AVX-512: a multiple of 16 up to
// 256; AVX2: of 8 up to 256: Gemma 3 and Qwen3.5 have heads of 256) and returns false for other
// sizes.
struct BlockAttentionKernels {
    void (*qk)(const float* k, size_t stride, int j0, int j1, const float* const* q, int nq,
               float scale, float* const* s);
    void (*pv)(const float* v, size_t stride, int j0, int j1, const float* const* p, int nq,
               float* const* out);
    // The same over F16 rows (`stride` halves apart), each value widened exactly as it is loaded:
    // the same results as qk / pv on the rows converted to floats first.
    void (*qk_h)(const uint16_t* k, size_t stride, int j0, int j1, const float* const* q, int nq,
                 float scale, float* const* s);
    void (*pv_h)(const uint16_t* v, size_t stride, int j0, int j1, const float* const* p, int nq,
                 float* const* out);
    // x[0..n) = softmax(x) (vectorised exp; the result depends only on the row's values). Null
    // where the ISA has none (AVX2): the caller's scalar softmax then.
    void (*softmax)(float* x, int n);
};

}  // namespace specula
