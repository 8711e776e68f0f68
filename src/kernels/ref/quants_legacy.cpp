// Scalar reference for the legacy 32-element formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the
// activation format Q8_1: dequantization, ggml-compatible round-to-nearest quantizers, and the
// dot products with Q8_0 / Q8_1 activations.
//
// Nibble order: element j of a block is the low nibble of qs[j], element j + 16 the high nibble.
// For Q5_x the fifth bit of element j is bit j of the 32-bit little-endian qh.
// Dot products: an exact integer sum per block, then sumf += isum * (d_w * d_a) in float, block
// by block (Q4_1/Q5_1 add m_w * s_a for the offset term).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ref/quants_internal.h"

namespace specula::ref {

namespace {

constexpr int kHalf = 16;  // elements per nibble half of a 32-element block

uint32_t load_qh(const uint8_t* qh) {
    uint32_t v;
    std::memcpy(&v, qh, 4);
    return v;
}

// The fifth bits of elements j and j + 16, as 0 or 16.
int high_bit_lo(uint32_t qh, int j) {
    return ((qh >> j) & 1) << 4;
}
int high_bit_hi(uint32_t qh, int j) {
    return ((qh >> (j + kHalf)) & 1) << 4;
}

float max_abs_signed(const float* x, int n) {  // the value of largest magnitude, with its sign
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

// ggml's MIN(top, (int8_t)v) for the v >= 0 of finite inputs: truncation toward zero, at most top.
// Non-finite v (from Inf/NaN inputs) gives 0 instead of an undefined conversion.
int trunc_level(float v, int top) {
    if (!(v >= 0.0f)) return 0;
    return v >= static_cast<float>(top) ? top : static_cast<int>(v);
}

void min_max(const float* x, int n, float* mn, float* mx) {
    *mn = INFINITY;
    *mx = -INFINITY;
    for (int j = 0; j < n; ++j) {
        *mn = std::min(*mn, x[j]);
        *mx = std::max(*mx, x[j]);
    }
}

// The nibble formats (Q4_0, Q4_1, Q5_0, Q5_1): elements j and j + 16 of a block (j < 16) are the
// low and high nibbles of qs[j], with a fifth bit from qh for Q5_*, minus kOffset (Q4_0: 8, Q5_0:
// 16); the Q*_1 formats add their min (m) instead.
template <class X>
constexpr bool kFifthBit = requires(const X& b) {
    b.qh;
};
template <class X>
constexpr bool kMin = requires(const X& b) {
    b.m;
};

struct NibblePair {
    int lo, hi;
};
template <class X>
NibblePair nibbles(const X& b, uint32_t qh, int j) {
    NibblePair p{b.qs[j] & 0x0F, b.qs[j] >> 4};
    if constexpr (kFifthBit<X>) p.lo |= high_bit_lo(qh, j), p.hi |= high_bit_hi(qh, j);
    return p;
}
template <class X>
uint32_t block_qh(const X& b) {
    if constexpr (kFifthBit<X>) return load_qh(b.qh);
    return 0;
}

template <int kOffset, class X>
void dequantize_nibbles(const X* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / 32; ++i, y += 32) {
        const float d = fp16_to_fp32(x[i].d);
        float m = 0.0f;
        if constexpr (kMin<X>) m = fp16_to_fp32(x[i].m);
        const uint32_t qh = block_qh(x[i]);
        for (int j = 0; j < kHalf; ++j) {
            const NibblePair q = nibbles(x[i], qh, j);
            if constexpr (kMin<X>) {
                y[j] = q.lo * d + m;
                y[j + kHalf] = q.hi * d + m;
            } else {
                y[j] = (q.lo - kOffset) * d;
                y[j + kHalf] = (q.hi - kOffset) * d;
            }
        }
    }
}

// Against Q8_0 / Q8_1 activations.
template <int kOffset, class X, class Y>
float vec_dot_nibbles(int64_t n, const X* x, const Y* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / 32; ++i) {
        const uint32_t qh = block_qh(x[i]);
        int isum = 0;
        for (int j = 0; j < kHalf; ++j) {
            const NibblePair q = nibbles(x[i], qh, j);
            isum += (q.lo - kOffset) * y[i].qs[j];
            isum += (q.hi - kOffset) * y[i].qs[j + kHalf];
        }
        if constexpr (kMin<X>) {
            sumf += isum * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) +
                    fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
        } else {
            sumf += isum * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
        }
    }
    return sumf;
}

}  // namespace

// ---- dequantization ---------------------------------------------------------------------------

void dequantize_q4_0(const block_q4_0* x, float* y, int64_t n) {
    dequantize_nibbles<8>(x, y, n);
}

void dequantize_q4_1(const block_q4_1* x, float* y, int64_t n) {
    dequantize_nibbles<0>(x, y, n);
}

void dequantize_q5_0(const block_q5_0* x, float* y, int64_t n) {
    dequantize_nibbles<16>(x, y, n);
}

void dequantize_q5_1(const block_q5_1* x, float* y, int64_t n) {
    dequantize_nibbles<0>(x, y, n);
}

void dequantize_q8_0(const block_q8_0* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK8_0; ++i, y += QK8_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; ++j) y[j] = x[i].qs[j] * d;
    }
}

void dequantize_q8_1(const block_q8_1* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK8_1; ++i, y += QK8_1) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_1; ++j) y[j] = x[i].qs[j] * d;
    }
}

// ---- quantization -----------------------------------------------------------------------------

// Q4_0: d = max / -8 where max is the value of largest magnitude (so it maps to level 0 exactly),
// q = min(15, trunc(x / d + 8.5)).
void quantize_q4_0(const float* x, block_q4_0* y, int64_t n) {
    for (int64_t i = 0; i < n / QK4_0; ++i, x += QK4_0) {
        const float d = max_abs_signed(x, QK4_0) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = trunc_level(x[j] * id + 8.5f, 15);
            const int q1 = trunc_level(x[j + kHalf] * id + 8.5f, 15);
            y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

// Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5)).
void quantize_q4_1(const float* x, block_q4_1* y, int64_t n) {
    for (int64_t i = 0; i < n / QK4_1; ++i, x += QK4_1) {
        float mn, mx;
        min_max(x, QK4_1, &mn, &mx);
        const float d = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(mn);
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = trunc_level((x[j] - mn) * id + 0.5f, 15);
            const int q1 = trunc_level((x[j + kHalf] - mn) * id + 0.5f, 15);
            y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

// Q5_0: d = max / -16, q = min(31, trunc(x / d + 16.5)).
void quantize_q5_0(const float* x, block_q5_0* y, int64_t n) {
    for (int64_t i = 0; i < n / QK5_0; ++i, x += QK5_0) {
        const float d = max_abs_signed(x, QK5_0) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = trunc_level(x[j] * id + 16.5f, 31);
            const int q1 = trunc_level(x[j + kHalf] * id + 16.5f, 31);
            y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
            qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kHalf);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

// Q5_1: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5) (at most 31).
void quantize_q5_1(const float* x, block_q5_1* y, int64_t n) {
    for (int64_t i = 0; i < n / QK5_1; ++i, x += QK5_1) {
        float mn, mx;
        min_max(x, QK5_1, &mn, &mx);
        const float d = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = trunc_level((x[j] - mn) * id + 0.5f, 31);
            const int q1 = trunc_level((x[j + kHalf] - mn) * id + 0.5f, 31);
            y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
            qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kHalf);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

namespace {

// One 32-element block to 8 bits: d = amax / 127 and q = round(x / d), returning d (as float).
// Reference (quantize_row_q8_0_ref): id = 1 / d, ties away from zero (roundf). CpuBackend
// (ggml-cpu's AVX2 quantize_row_q8_0/q8_1, what llama.cpp runs on x86): id = 127 / amax, ties to
// even.
float quantize_block_q8(const float* x, int8_t* q, Q8Rounding rounding) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    if (rounding == Q8Rounding::Reference) {
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK8_0; ++j) q[j] = static_cast<int8_t>(std::lroundf(x[j] * id));
    } else {
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < QK8_0; ++j) q[j] = static_cast<int8_t>(nearest_int(x[j] * id));
    }
    return d;
}

}  // namespace

void quantize_q8_0(const float* x, block_q8_0* y, int64_t n, Q8Rounding rounding) {
    for (int64_t i = 0; i < n / QK8_0; ++i, x += QK8_0) {
        y[i].d = fp32_to_fp16(quantize_block_q8(x, y[i].qs, rounding));
    }
}

// Q8_1: as Q8_0, plus s = d * sum(q) computed from the float d (before rounding it to fp16).
void quantize_q8_1(const float* x, block_q8_1* y, int64_t n, Q8Rounding rounding) {
    for (int64_t i = 0; i < n / QK8_1; ++i, x += QK8_1) {
        const float d = quantize_block_q8(x, y[i].qs, rounding);
        int sum = 0;
        for (int j = 0; j < QK8_1; ++j) sum += y[i].qs[j];
        y[i].d = fp32_to_fp16(d);
        y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
    }
}

// ---- dot products -----------------------------------------------------------------------------

float vec_dot_q4_0_q8_0(int64_t n, const block_q4_0* x, const block_q8_0* y) {
    return vec_dot_nibbles<8>(n, x, y);
}

float vec_dot_q4_1_q8_1(int64_t n, const block_q4_1* x, const block_q8_1* y) {
    return vec_dot_nibbles<0>(n, x, y);
}

float vec_dot_q5_0_q8_0(int64_t n, const block_q5_0* x, const block_q8_0* y) {
    return vec_dot_nibbles<16>(n, x, y);
}

float vec_dot_q5_1_q8_1(int64_t n, const block_q5_1* x, const block_q8_1* y) {
    return vec_dot_nibbles<0>(n, x, y);
}

float vec_dot_q8_0_q8_0(int64_t n, const block_q8_0* x, const block_q8_0* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; ++i) {
        int isum = 0;
        for (int j = 0; j < QK8_0; ++j) isum += x[i].qs[j] * y[i].qs[j];
        sumf += isum * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sumf;
}

}  // namespace specula::ref
