// Private to the scalar reference (kernels/quants*.cpp): the per-type routines that
// kernels/quants.h dispatches to. Each takes whole blocks: n is a multiple of the block size
// (quants.cpp checks that before calling). Rounding helpers shared by the quantizers live here too.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/layout/blocks.h"

namespace specula::ref {

// Round half to even (the default FP rounding mode), as ggml's nearest_int does for |x| < 2^22.
inline int nearest_int(float x) {
    return static_cast<int>(std::lrintf(x));
}

// Legacy 32-element formats (quants_legacy.cpp).
void dequantize_q4_0(const block_q4_0* x, float* y, int64_t n);
void dequantize_q4_1(const block_q4_1* x, float* y, int64_t n);
void dequantize_q5_0(const block_q5_0* x, float* y, int64_t n);
void dequantize_q5_1(const block_q5_1* x, float* y, int64_t n);
void dequantize_q8_0(const block_q8_0* x, float* y, int64_t n);
void dequantize_q8_1(const block_q8_1* x, float* y, int64_t n);

void quantize_q4_0(const float* x, block_q4_0* y, int64_t n);
void quantize_q4_1(const float* x, block_q4_1* y, int64_t n);
void quantize_q5_0(const float* x, block_q5_0* y, int64_t n);
void quantize_q5_1(const float* x, block_q5_1* y, int64_t n);
// How the 8-bit activation quantizers round (see quantize_block_q8 in quants_legacy.cpp).
enum class Q8Rounding { Reference, CpuBackend };
void quantize_q8_0(const float* x, block_q8_0* y, int64_t n, Q8Rounding rounding);
void quantize_q8_1(const float* x, block_q8_1* y, int64_t n, Q8Rounding rounding);

float vec_dot_q4_0_q8_0(int64_t n, const block_q4_0* x, const block_q8_0* y);
float vec_dot_q4_1_q8_1(int64_t n, const block_q4_1* x, const block_q8_1* y);
float vec_dot_q5_0_q8_0(int64_t n, const block_q5_0* x, const block_q8_0* y);
float vec_dot_q5_1_q8_1(int64_t n, const block_q5_1* x, const block_q8_1* y);
float vec_dot_q8_0_q8_0(int64_t n, const block_q8_0* x, const block_q8_0* y);

// K-quants, 256-element super-blocks (quants_k.cpp).
void dequantize_q2_K(const block_q2_K* x, float* y, int64_t n);
void dequantize_q3_K(const block_q3_K* x, float* y, int64_t n);
void dequantize_q4_K(const block_q4_K* x, float* y, int64_t n);
void dequantize_q5_K(const block_q5_K* x, float* y, int64_t n);
void dequantize_q6_K(const block_q6_K* x, float* y, int64_t n);
void dequantize_q8_K(const block_q8_K* x, float* y, int64_t n);

void quantize_q8_K(const float* x, block_q8_K* y, int64_t n);

// Q4_K / Q5_K: scale and min of sub-block j (0..7) from the 12-byte packing: 8 pairs of 6 bits.
// Pairs 0..3 sit in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); pairs 4..7 take their
// low 4 bits from bytes 8..11 and their top 2 bits from the top bits of bytes 0..7. (Inline: the
// Q4_K repack calls it for every row of every super-block at load.)
inline void get_scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
// Q4_K: the 4-bit value (0..15) of element l (0..255) of a super-block.
int q4_K_value(const block_q4_K& b, int l);
// Q6_K: the signed 6-bit value (-32..31) of element l.
int q6_K_value(const block_q6_K& b, int l);

float vec_dot_q2_K_q8_K(int64_t n, const block_q2_K* x, const block_q8_K* y);
float vec_dot_q3_K_q8_K(int64_t n, const block_q3_K* x, const block_q8_K* y);
float vec_dot_q4_K_q8_K(int64_t n, const block_q4_K* x, const block_q8_K* y);
float vec_dot_q5_K_q8_K(int64_t n, const block_q5_K* x, const block_q8_K* y);
float vec_dot_q6_K_q8_K(int64_t n, const block_q6_K* x, const block_q8_K* y);

// Non-linear 4-bit formats (quants_iq.cpp).
void dequantize_iq4_nl(const block_iq4_nl* x, float* y, int64_t n);
void dequantize_iq4_xs(const block_iq4_xs* x, float* y, int64_t n);

float vec_dot_iq4_nl_q8_0(int64_t n, const block_iq4_nl* x, const block_q8_0* y);
float vec_dot_iq4_xs_q8_K(int64_t n, const block_iq4_xs* x, const block_q8_K* y);

// MXFP4 (quants_mxfp4.cpp).
float mxfp4_scale(uint8_t e);  // 2^(e - 128): the scale of the doubled kvalues_mxfp4
void dequantize_mxfp4(const block_mxfp4* x, float* y, int64_t n);
void quantize_mxfp4(const float* x, block_mxfp4* y, int64_t n);
float vec_dot_mxfp4_q8_0(int64_t n, const block_mxfp4* x, const block_q8_0* y);

}  // namespace specula::ref
