// F16 and BF16 weights with rows interleaved in panels, repacked once at load (through
// kernels/repack.h's repack(), which calls float_repack) for outer-product kernels. The GGUF row
// layout makes a kernel reduce every (row, token) dot product across SIMD lanes (and convert each
// weight vector once per tile of tokens); the panel layout puts kPackRows = 16 rows side by side,
// so one 32-byte load converts to the 16 rows' weights for one column k, and the SIMD lanes run
// across outputs: acc[row] = fma(w[row][k], x[t][k], acc[row]) with x[t][k] broadcast.
//
// Layout of a packed matrix: ceil(rows / 16) panels of float_tile_bytes(cols) = 32 * cols bytes,
// panel i holding rows 16 i .. 16 i + 15 (rows past the end are zero): element (row 16 i + r,
// column k) is the 16-bit value at panel[16 k + r], unchanged from the file (F16 or BF16 bits).
//
// The operations of one output y[t][r] (the scalar reference float_packed_tile_ref, and every
// SIMD level, bit for bit): the columns in blocks of kFloatBlock = 256 (the last one shorter),
// each block a sequential chain s = fma(w, x, s) from s = 0 over its columns in order, and
// tot = tot + s over the blocks in order from tot = 0. That sequence depends on nothing but the
// row and the token, so every batch size, token grouping, thread split and ISA level gives the
// same bits (batch invariance, and scalar == AVX2 == AVX-512; but BF16 at AVX-512, which runs
// kernels/avx512/dot_bf16.cpp's vdpbf16ps chains over column pairs on BF16 activation pairs:
// batch invariant, within rounding of the others). The block partial sums keep the
// chains short (precision close to the row layout's 16-lane chains) and let a kernel run several
// blocks of one panel side by side when it has few tokens to hide the FMA latency with.
//
// The activations are the tokens' vec_dot_type rows (F16 or BF16, as llama.cpp rounds them)
// widened exactly to floats once per matmul (float_prepare_acts), tokens interleaved per chunk
// of kFloatChunk: chunk c (tokens 16 c .. 16 c + m - 1, m = min(16, ntok - 16 c)) starts at
// float 16 c * cols and holds token 16 c + t's column k at [k * m + t], so a kernel broadcasts
// a group's activations for one column from one cache line. PackedActs::stride = 4 * cols (the
// kernels read cols from it; q + t0 * stride is chunk t0 / 16's start for t0 a multiple of 16),
// d and corr unused. A kernel call takes the tokens of one chunk (ntok <= kFloatChunk; matmul's
// token blocks are kFloatChunk). For BF16 at AVX-512 the chunk holds 32-bit words instead, token
// t's columns 2j and 2j + 1 as BF16 bits at word [j * m + t] (avx512/dot_bf16.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/repack.h"

namespace specula {

constexpr int64_t kFloatBlock = 256;  // columns per partial chain
constexpr int kFloatChunk = 16;       // tokens per activation chunk (and per kernel call)

// F16 and BF16.
bool float_repackable(GGMLType t);

// Whether Model::load (pack_weights) packs F16 / BF16 matrices: the kernel policy's repack_float
// (off keeps their row layout and the float_tiles.inc kernels, for A/B runs).
bool float_repack_at_load();

// Bytes of one panel (16 rows) of a packed float matrix.
size_t float_tile_bytes(int64_t cols);

// Writes W (row layout) as panels to dst (ceil(rows / 16) * float_tile_bytes(cols) bytes).
void float_repack(const WeightView& W, uint8_t* dst);

// Row r of a packed float matrix as floats (exact).
void float_dequantize_packed_row(const WeightView& W, int64_t r, float* out);

// Widens ntok rows of vec_dot_type(wt) activations (row t at acts + t * stride, cols elements)
// to floats in out (ntok * cols) and returns them as the packed kernels' activations.
PackedActs float_prepare_acts(GGMLType wt, const uint8_t* acts, size_t stride, int64_t cols,
                              int ntok, float* out);

// The scalar reference panel kernels (the float operations of the SIMD ones).
void float_tile_ref_f16(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi,
                        float* y, int64_t ldy);
void float_tile_ref_bf16(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi,
                         float* y, int64_t ldy);

}  // namespace specula
