// Matrix products of a weight matrix (any supported type) with a batch of token activations.
//
// Contract used by speculative decoding: the result for a token does not depend on how many
// tokens share the call (batch invariance). Every output element y[t][r] is computed by the same
// sequence of operations whether ntok is 1 or 16: the kernel streams each weight row once and
// dots it with every token's activations, each with its own fixed-order reduction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/threadpool.h"
#include "gguf/ggml_types.h"
#include "kernels/kernel_types.h"

namespace specula {

// A row-major matrix stored as GGUF lays it out: `rows` rows of `cols` elements of `type`.
// `packed`, when set, holds the same matrix with its rows interleaved in tiles (kernels/repack.h,
// 64-byte aligned), which matmul then uses instead of `data`; `data` stays valid (it is what
// row() reads).
struct WeightView {
    GGMLType type = GGMLType::F32;
    int64_t rows = 0;
    int64_t cols = 0;
    const uint8_t* data = nullptr;
    const uint8_t* packed = nullptr;
    size_t row_bytes() const { return row_size(type, cols); }
    const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes(); }
};

// Reusable buffers so the per-token path does not allocate once warmed up.
struct MatmulScratch {
    std::vector<uint8_t> acts;         // activations quantized to the vec_dot_type
    std::vector<float> act_scales;     // their Q8_0 block scales as floats (for the SIMD kernels)
    std::vector<float> packed_d;       // the same per token and block, for packed weights
    std::vector<int32_t> packed_corr;  // -128 * the sum of each block's quants (PackedActs)
    std::vector<uint8_t> packed_q;     // Q8_K quants rearranged for packed K-quants (repack_k.h),
                                       // or Q8_0's block records (PackedActs::records)
    // matmul_stack's per-matrix copies of the three above (a packed stack's matrices each read
    // their own tokens' sums).
    std::vector<std::vector<float>> stack_d;
    std::vector<std::vector<int32_t>> stack_corr;
    std::vector<std::vector<uint8_t>> stack_q;
    std::vector<PackedActs> stack_acts;
};

// y[t * ldy + r] = sum_c W[r][c] * x[t * ldx + c], for r < W.rows, t < ntok.
// x is float; it is rounded to vec_dot_type(W.type) first. Threads split the rows.
void matmul(const WeightView& W, const float* x, int64_t ldx, int ntok, float* y, int64_t ldy,
            ThreadPool& pool, MatmulScratch& scratch);

// One weight of a matmul_multi() call and where its result goes: y[t * ldy + r].
struct MatmulJob {
    WeightView W;
    float* y = nullptr;
    int64_t ldy = 0;
};

// Several weights applied to the same input (Q, K and V; FFN gate and up) in one pass: x is
// rounded once and the rows of all weights share a single pool.run (one barrier instead of one per
// weight). The weights must have the same number of columns. Results are bit-identical to
// separate matmul() calls. Weights whose activation types differ are run one by one.
void matmul_multi(std::span<const MatmulJob> jobs, const float* x, int64_t ldx, int ntok,
                  ThreadPool& pool, MatmulScratch& scratch);

// The n matrices of a stack of equal height along W's rows (matrix i: rows [i, i + 1) * W.rows / n,
// as kernels/repack.h's stack_slice takes them), each applied to its own input, the inputs
// interleaved: y[t * ldy + i * ys + r] = sum_c W_i[r][c] * x[(t * n + i) * xs + c], for t < ntok.
// The activations are rounded once and every matrix's rows share one pool.run (one barrier for
// the stack, not one per matrix: MLA's per-head matrices). Bit-identical to n matmul() calls.
void matmul_stack(const WeightView& W, int n, const float* x, int64_t xs, int ntok, float* y,
                  int64_t ldy, int64_t ys, ThreadPool& pool, MatmulScratch& scratch);

// Same as matmul, restricted to rows [r0, r1) of W (MoE experts, or a caller doing its own
// threading): single-threaded, writes y[t * ldy + (r - r0)]. `acts` must come from quantize_acts().
// For a packed W it allocates the per-block activation sums on each call.
void matmul_rows(const WeightView& W, const uint8_t* acts, size_t act_stride, int ntok, int64_t r0,
                 int64_t r1, float* y, int64_t ldy);

// Quantizes ntok rows of x to vec_dot_type(weight_type) into scratch.acts; returns the stride
// (bytes per token) of the result.
size_t quantize_acts(GGMLType weight_type, const float* x, int64_t ldx, int64_t cols, int ntok,
                     MatmulScratch& scratch);
// The same bytes, the tokens split over the pool's threads when there are enough of them.
size_t quantize_acts(GGMLType weight_type, const float* x, int64_t ldx, int64_t cols, int ntok,
                     MatmulScratch& scratch, ThreadPool& pool);

}  // namespace specula
