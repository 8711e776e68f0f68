// Private to kernels/: the per-level kernel and quantizer tables that kernels/dispatch.cpp chooses
// from. Each
// *_avx2.cpp / *_avx512.cpp translation unit is compiled with its own target flags; nothing in it
// may run before dispatch has checked that the CPU has those instructions.
#pragma once

#include "kernels/dispatch.h"

namespace specula::simd {

// nullptr when that level has no kernel for the weight type.
VecDotFn avx2_vec_dot(GGMLType wt);
VecDotFn avx512_vec_dot(GGMLType wt);

// matmul's entry for the weight types whose activations are Q8_0 (Q8_0, Q4_0, Q5_0, IQ4_NL): a
// VecDotFn that also gets the tokens' block scales as floats, ad[ib * ad_stride + t] = the fp16 d
// of token t's block ib, so that the scale gather is done once per matmul rather than once per
// row. ad must stay readable 7 floats past the last scale it names. The results are those of the
// VecDotFn kernel, bit for bit. nullptr for other weight types.
using VecDotQ8Fn = void (*)(int64_t n, const void* w, const void* a, size_t a_stride,
                            const float* ad, size_t ad_stride, int ntok, float* out);
VecDotQ8Fn avx2_vec_dot_q8(GGMLType wt);
VecDotQ8Fn avx512_vec_dot_q8(GGMLType wt);

// The float weight types (F32, F16, BF16), several rows at once (register tiles of rows x tokens;
// dot_float_tiles.inc, built by dot_float_avx2.cpp and dot_float_avx512.cpp):
// y[t * ldy + r] = dot(row r, token t) for r < nrows, t < ntok, row r at w + r * w_stride bytes,
// token t at a + t * a_stride (activations in vec_dot_type). Each output's operations do not
// depend on nrows or ntok, and the level's *_float_vec_dot (the same chains, one row: the level's
// vec_dot entries for these types) gives the same bits. nullptr for other weight types.
using FloatRowsFn = void (*)(int64_t n, const void* w, size_t w_stride, int nrows, const void* a,
                             size_t a_stride, int ntok, float* y, int64_t ldy);
FloatRowsFn avx2_float_rows(GGMLType wt);
VecDotFn avx2_float_vec_dot(GGMLType wt);
FloatRowsFn avx512_float_rows(GGMLType wt);
VecDotFn avx512_float_vec_dot(GGMLType wt);
// The panel kernels for F16 / BF16 weights packed by kernels/repack_float.h (dot_float_panels.inc):
// the scalar reference's operations, bit for bit. nullptr for other weight types.
PackedTileFn avx2_float_packed_tile(GGMLType wt);
PackedTileFn avx512_float_packed_tile(GGMLType wt);
// Their activations' widening (kernels/repack_float.h's float_prepare_acts), one token: F16 or
// BF16 bits (type at) src[0 .. n) to floats dst[k * m]. nullptr for other types.
using WidenFn = void (*)(const uint16_t* src, int64_t n, float* dst, int64_t m);
WidenFn avx2_float_widen(GGMLType at);
WidenFn avx512_float_widen(GGMLType at);
// BF16 weights at AVX-512 (dot_bf16_avx512.cpp): the panel kernel by vdpbf16ps and its
// activations, kept BF16 as column pairs; what avx512_float_packed_tile / avx512_float_widen
// give for BF16 where bf16_dot_at_avx512() (kernels/repack_float.h). Within rounding of the
// other levels, not bitwise.
PackedTileFn avx512_bf16_packed_tile();
WidenFn avx512_bf16_widen();

// matmul's entry for two adjacent weight rows at once (Q4_K, Q5_K, Q6_K at the AVX-512 level):
// y[t * ldy + i] = dot(row i, token t) for i < 2 and t < ntok, row i at w + i * w_stride. Each
// result is the VecDotFn kernel's for that row and token, bit for bit (so batch invariance and the
// AVX2 / AVX-512 agreement hold unchanged). nullptr for other weight types and levels.
using VecDotRows2Fn = void (*)(int64_t n, const void* w, size_t w_stride, const void* a,
                               size_t a_stride, int ntok, float* y, size_t ldy);
VecDotRows2Fn avx512_vec_dot_rows2(GGMLType wt);

// AVX2 activation quantizers (quantize_avx2.cpp); nullptr for a type it does not handle.
QuantizeRowFn avx2_quantize_row(GGMLType act_type);

}  // namespace specula::simd
