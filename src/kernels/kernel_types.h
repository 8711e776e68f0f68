// The signatures of the kernels the table (kernels/table.h) holds, and the activations a packed
// kernel reads. Every kernel of one signature computes the same function; the contracts below are
// what each implementation (scalar reference, AVX2, AVX-512, AMX) keeps.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula {

// out[t] = dot(w, a + t * a_stride) for t < ntok; w is a row of n elements of the weight type,
// each activation row is in vec_dot_type(weight type). out[t] must not depend on ntok (batch
// invariance).
using VecDotFn = void (*)(int64_t n, const void* w, const void* a, size_t a_stride, int ntok,
                          float* out);

// The weight types whose activations are Q8_0 (Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4): a
// VecDotFn that also
// gets the tokens' block scales as floats, ad[ib * ad_stride + t] = the fp16 d of token t's block
// ib, so that the scale gather is done once per matmul rather than once per row. ad must stay
// readable 7 floats past the last scale it names. The results are those of the VecDotFn, bit for
// bit.
using VecDotQ8Fn = void (*)(int64_t n, const void* w, const void* a, size_t a_stride,
                            const float* ad, size_t ad_stride, int ntok, float* out);

// The float weight types (F32, F16, BF16), several rows at once (register tiles of rows x tokens):
// y[t * ldy + r] = dot(row r, token t) for r < nrows, t < ntok, row r at w + r * w_stride bytes,
// token t at a + t * a_stride (activations in vec_dot_type). Each output's operations do not
// depend on nrows or ntok, and the same ISA's VecDotFn for the type gives the same bits.
using FloatRowsFn = void (*)(int64_t n, const void* w, size_t w_stride, int nrows, const void* a,
                             size_t a_stride, int ntok, float* y, int64_t ldy);

// Two adjacent weight rows at once: y[t * ldy + i] = dot(row i, token t) for i < 2 and t < ntok,
// row i at w + i * w_stride. Each result is the VecDotFn's for that row and token, bit for bit.
using VecDotRows2Fn = void (*)(int64_t n, const void* w, size_t w_stride, const void* a,
                               size_t a_stride, int ntok, float* y, size_t ldy);

// Rounds a row of n floats to an activation type (Q8_0, Q8_1, Q8_K, F16, BF16, F32) with results
// bit-identical to quantize_row_ggml_cpu (kernels/quants.h); n a multiple of the block size.
using QuantizeRowFn = void (*)(const float* x, void* dst, int64_t n);

// The activations a packed kernel reads (kernels/repack.h's packed_acts): Q8_0 rows with, per
// token t and block b, the scale as a float d[t * nb + b] and corr[t * nb + b] = -128 * the sum
// of the block's 32 quants; or the K-quant / float layouts' own arrangement (kernels/layout/).
struct PackedActs {
    const uint8_t* q = nullptr;  // token t's row at q + t * stride, block_q8_0 blocks
    size_t stride = 0;
    const float* d = nullptr;
    const int32_t* corr = nullptr;
    int64_t nb = 0;  // blocks per row
    // Q8_0 passes of 2 to kBlockRecordTokens tokens also have the same values block-major:
    // record b (block_record_bytes(n) bytes at records + b * that) holds the n tokens' corr
    // (int32), then their d (float), then their 32 quants each, so a kernel walks one pointer
    // with fixed offsets rather than a pointer per token. Null otherwise; n is record_tokens.
    const uint8_t* records = nullptr;
    int record_tokens = 0;
};

constexpr int kBlockRecordTokens = 9;
constexpr size_t block_record_bytes(int ntok) {
    return static_cast<size_t>(ntok) * (2 * sizeof(int32_t) + 32);
}

// A tile kernel: for tokens 0 .. ntok-1 and rows lo .. hi-1 of the tile (0 <= lo < hi <= 16),
// y[t * ldy + (r - lo)] = the packed dot product of row r with token t.
using PackedTileFn = void (*)(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi,
                              float* y, int64_t ldy);

// A pair kernel: two whole tiles, `tile` and `tile + tile_bytes` (rows 0 .. 31 of the pair), for
// tokens 0 .. ntok-1: y[t * ldy + r] = the packed dot product of row r with token t, the same bits
// as the ISA's PackedTileFn on each tile.
using PackedPairFn = void (*)(const uint8_t* tile, size_t tile_bytes, const PackedActs& a, int ntok,
                              float* y, int64_t ldy);

// The packed F16 / BF16 kernels' activation widening (kernels/layout/repack_float.h), one token:
// F16 or BF16 bits src[0 .. n) to floats dst[k * m].
using WidenFn = void (*)(const uint16_t* src, int64_t n, float* dst, int64_t m);

struct BlockAttentionKernels;  // kernels/attention.h

}  // namespace specula
