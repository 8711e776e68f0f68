// Scalar reference for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and their activation format
// Q8_K: dequantization, the Q8_K quantizer, and the dot products with Q8_K activations.
//
// All of them use 256-element super-blocks with one fp16 scale (and for Q2_K/Q4_K/Q5_K a second
// fp16 scale for the mins) and small integer scales per 16- or 32-element sub-block.
// Dot products: an exact integer sum per super-block (sub-block sums times the integer sub-block
// scales), then sumf += d_w * d_a * isum (- dmin_w * d_a * min term from the Q8_K bsums) in
// float, super-block by super-block.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ref/quants_internal.h"

namespace specula::ref {

// Q4_K: the 4-bit value of element l: 64-element groups use 32 bytes, low nibbles first.
int q4_K_value(const block_q4_K& b, int l) {
    const uint8_t q = b.qs[32 * (l / 64) + l % 32];
    return (l % 64) < 32 ? (q & 0x0F) : (q >> 4);
}

// Q6_K: the signed 6-bit value of element l. Each 128-element half uses 64 bytes of ql and 32 of
// qh; quarter k of the half takes nibble (k / 2) of ql[(k % 2) * 32 + i] and bits 2k..2k+1 of
// qh[i].
int q6_K_value(const block_q6_K& b, int l) {
    const int half = l / 128, r = l % 128;
    const int k = r / 32, i = r % 32;
    const uint8_t ql = b.ql[64 * half + (k % 2) * 32 + i];
    const int low = k < 2 ? (ql & 0x0F) : (ql >> 4);
    const int high = (b.qh[32 * half + i] >> (2 * k)) & 3;
    return (low | (high << 4)) - 32;
}

namespace {

// Q3_K: 16 6-bit scales packed in 12 bytes, returned with their -32 offset applied. Scale j's low
// 4 bits are the low (j < 8) or high (j >= 8) nibble of byte j % 8; its top 2 bits are bits
// 2 * (j / 4) .. +1 of byte 8 + j % 4.
void unpack_q3_K_scales(const uint8_t* packed, int* scales) {
    for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? (packed[j] & 0x0F) : (packed[j - 8] >> 4);
        const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        scales[j] = (lo | (hi << 4)) - 32;
    }
}

// Q3_K: the signed 3-bit value of element l (0..255): 2 low bits from qs, and -4 unless the hmask
// bit is set.
int q3_K_value(const block_q3_K& b, int l) {
    const int half = l / 128, r = l % 128;  // 128-element halves use qs[32 * half ..]
    const int shift = 2 * (r / 32), idx = r % 32;
    const int low = (b.qs[32 * half + idx] >> shift) & 3;
    const int hbit = (b.hmask[idx] >> (4 * half + r / 32)) & 1;
    return low - (hbit ? 0 : 4);
}

// Q2_K: the 2-bit value of element l (0..255).
int q2_K_value(const block_q2_K& b, int l) {
    const int half = l / 128, r = l % 128;
    return (b.qs[32 * half + r % 32] >> (2 * (r / 32))) & 3;
}

// Q5_K: Q4_K's nibble plus a fifth bit, bit (l / 32) of qh[l % 32].
int q5_K_value(const block_q5_K& b, int l) {
    const uint8_t q = b.qs[32 * (l / 64) + l % 32];
    const int low = (l % 64) < 32 ? (q & 0x0F) : (q >> 4);
    return low | (((b.qh[l % 32] >> (l / 32)) & 1) << 4);
}

}  // namespace

// ---- dequantization ---------------------------------------------------------------------------

void dequantize_q2_K(const block_q2_K* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
        for (int l = 0; l < QK_K; ++l) {
            const uint8_t sc = x[i].scales[l / 16];
            y[l] = d * (sc & 0x0F) * q2_K_value(x[i], l) - dmin * (sc >> 4);
        }
    }
}

void dequantize_q3_K(const block_q3_K* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        int scales[16];
        unpack_q3_K_scales(x[i].scales, scales);
        for (int l = 0; l < QK_K; ++l) y[l] = d * scales[l / 16] * q3_K_value(x[i], l);
    }
}

namespace {

// Q4_K and Q5_K differ only in how an element's value is read (value): the same 8 sub-blocks of
// 32 with 6-bit scales and mins, dequantized and dotted the same way.
template <class Block, int (*value)(const Block&, int)>
void dequantize_k4(const Block* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
        for (int s = 0; s < 8; ++s) {
            int sc, m;
            get_scale_min_k4(s, x[i].scales, &sc, &m);
            const float ds = d * sc, ms = dmin * m;
            for (int l = 32 * s; l < 32 * s + 32; ++l) y[l] = ds * value(x[i], l) - ms;
        }
    }
}

}  // namespace

void dequantize_q4_K(const block_q4_K* x, float* y, int64_t n) {
    dequantize_k4<block_q4_K, q4_K_value>(x, y, n);
}

void dequantize_q5_K(const block_q5_K* x, float* y, int64_t n) {
    dequantize_k4<block_q5_K, q5_K_value>(x, y, n);
}

void dequantize_q6_K(const block_q6_K* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        for (int l = 0; l < QK_K; ++l) y[l] = d * x[i].scales[l / 16] * q6_K_value(x[i], l);
    }
}

void dequantize_q8_K(const block_q8_K* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
        for (int l = 0; l < QK_K; ++l) y[l] = x[i].d * x[i].qs[l];
    }
}

// ---- Q8_K quantizer ---------------------------------------------------------------------------

// Per super-block: max = the value of largest magnitude (with its sign), iscale = -127 / max,
// q = min(127, nearest_int(iscale * x)), d = 1 / iscale, bsums = sums of 16-element groups.
// An all-zero block gives d = 0, q = 0, bsums = 0.
void quantize_q8_K(const float* x, block_q8_K* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int l = 0; l < QK_K; ++l) {
            const float ax = std::fabs(x[l]);
            if (ax > amax) {
                amax = ax;
                max = x[l];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int l = 0; l < QK_K; ++l) {
            y[i].qs[l] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[l])));
        }
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
            y[i].bsums[g] = static_cast<int16_t>(sum);
        }
        y[i].d = 1.0f / iscale;
    }
}

// ---- dot products -----------------------------------------------------------------------------

namespace {

// Sum of the Q8_K values of 16-element group g, from bsums.
int group_sum16(const block_q8_K& a, int g) {
    return a.bsums[g];
}

}  // namespace

float vec_dot_q2_K_q8_K(int64_t n, const block_q2_K* x, const block_q8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int isum = 0, summs = 0;
        for (int g = 0; g < QK_K / 16; ++g) {
            int gsum = 0;
            for (int l = 16 * g; l < 16 * g + 16; ++l) gsum += q2_K_value(x[i], l) * y[i].qs[l];
            isum += (x[i].scales[g] & 0x0F) * gsum;
            summs += (x[i].scales[g] >> 4) * group_sum16(y[i], g);
        }
        const float dall = y[i].d * fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
        sumf += dall * isum - dmin * summs;
    }
    return sumf;
}

float vec_dot_q3_K_q8_K(int64_t n, const block_q3_K* x, const block_q8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int scales[16];
        unpack_q3_K_scales(x[i].scales, scales);
        int isum = 0;
        for (int g = 0; g < QK_K / 16; ++g) {
            int gsum = 0;
            for (int l = 16 * g; l < 16 * g + 16; ++l) gsum += q3_K_value(x[i], l) * y[i].qs[l];
            isum += scales[g] * gsum;
        }
        sumf += fp16_to_fp32(x[i].d) * y[i].d * isum;
    }
    return sumf;
}

namespace {

template <class Block, int (*value)(const Block&, int)>
float vec_dot_k4_q8_K(int64_t n, const Block* x, const block_q8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int isum = 0, summs = 0;
        for (int s = 0; s < 8; ++s) {
            int sc, m;
            get_scale_min_k4(s, x[i].scales, &sc, &m);
            int ssum = 0;
            for (int l = 32 * s; l < 32 * s + 32; ++l) ssum += value(x[i], l) * y[i].qs[l];
            isum += sc * ssum;
            summs += m * (group_sum16(y[i], 2 * s) + group_sum16(y[i], 2 * s + 1));
        }
        const float d = y[i].d * fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
        sumf += d * isum - dmin * summs;
    }
    return sumf;
}

}  // namespace

float vec_dot_q4_K_q8_K(int64_t n, const block_q4_K* x, const block_q8_K* y) {
    return vec_dot_k4_q8_K<block_q4_K, q4_K_value>(n, x, y);
}

float vec_dot_q5_K_q8_K(int64_t n, const block_q5_K* x, const block_q8_K* y) {
    return vec_dot_k4_q8_K<block_q5_K, q5_K_value>(n, x, y);
}

float vec_dot_q6_K_q8_K(int64_t n, const block_q6_K* x, const block_q8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int isum = 0;
        for (int g = 0; g < QK_K / 16; ++g) {
            int gsum = 0;
            for (int l = 16 * g; l < 16 * g + 16; ++l) gsum += q6_K_value(x[i], l) * y[i].qs[l];
            isum += x[i].scales[g] * gsum;
        }
        sumf += fp16_to_fp32(x[i].d) * y[i].d * isum;
    }
    return sumf;
}

}  // namespace specula::ref
