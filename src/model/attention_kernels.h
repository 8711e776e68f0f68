// The inner loops of attention (q.k dot products and the weighted sum of V rows), with an
// AVX2/FMA version picked once per process when the CPU (and SPECULA_SIMD) allow it. A process
// always uses the same version, so results never depend on the batch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula {

float dot_f32_avx2(const float* x, const float* y, int64_t n);
void axpy_avx2(float a, const float* x, float* y, int64_t n);
// Rows of a typed KV cache as floats (exact conversions, equal to the scalar ones): F16 by
// vcvtph2ps, and d * q for int8 q (Q8_0).
void fp16_to_f32_avx2(const uint16_t* x, float* out, int n);
void i8_scale_to_f32_avx2(const int8_t* q, float d, float* out, int n);

struct AttentionKernels {
    float (*dot)(const float* x, const float* y, int64_t n);
    void (*axpy)(float a, const float* x, float* y, int64_t n);
};

// The best kernels for this CPU, chosen on first use.
const AttentionKernels& attention_kernels();

// Blocked attention: many queries (positions, and the query heads of one KV head) against the
// same K / V rows, each row loaded once per block. K and V rows are `stride` floats apart.
//   qk: s[i][j] = scale * dot(q[i], K row j) for j in [j0, j1), i < nq
//   pv: out[i] += sum of p[i][j] * V row j over j in [j0, j1) in order, i < nq
// A query's results do not depend on nq or on how [0, n) is split into [j0, j1) ranges.
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
    // x[0..n) = softmax(x) (vectorised exp; the result depends only on the row's values).
    void (*softmax)(float* x, int n);
};

// Blocked kernels for head_dim (AVX-512: a multiple of 16 up to 128; AVX2: of 8 up to 128):
// false for other sizes.
bool block_attention_avx512(int head_dim, BlockAttentionKernels* k);
bool block_attention_avx2(int head_dim, BlockAttentionKernels* k);

}  // namespace specula
