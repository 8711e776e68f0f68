// Scalar reference for the non-linear 4-bit formats IQ4_NL (32-element blocks, dotted with Q8_0)
// and IQ4_XS (256-element super-blocks with 6-bit sub-block scales, dotted with Q8_K). Both map
// each 4-bit index through the 16 levels kvalues_iq4nl; nibble order as in Q4_0 (element j in the
// low nibble of qs[j], element j + 16 in the high nibble, per 32 elements).
// Dot products: exact integer sums (IQ4_XS: times the integer sub-block scales), scaled in float
// per block / super-block and accumulated in block order.
#include "kernels/ref/quants_internal.h"

namespace specula::ref {

namespace {

constexpr int kHalf = 16;

// IQ4_XS: 6-bit scale of 32-element sub-block ib (0..7), with its -32 offset applied. Low 4 bits
// from nibble ib % 2 of scales_l[ib / 2], top 2 bits from bits 2 * ib .. +1 of scales_h.
int iq4_xs_scale(const block_iq4_xs& b, int ib) {
    const int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
    const int hi = (b.scales_h >> (2 * ib)) & 3;
    return (lo | (hi << 4)) - 32;
}

// Integer dot of 32 IQ4 levels (16 bytes of nibbles) with 32 int8 activations.
int dot_iq4_32(const uint8_t* qs, const int8_t* a) {
    int sum = 0;
    for (int j = 0; j < kHalf; ++j) {
        sum += kvalues_iq4nl[qs[j] & 0x0F] * a[j];
        sum += kvalues_iq4nl[qs[j] >> 4] * a[j + kHalf];
    }
    return sum;
}

void dequantize_iq4_32(const uint8_t* qs, float d, float* y) {
    for (int j = 0; j < kHalf; ++j) {
        y[j] = d * kvalues_iq4nl[qs[j] & 0x0F];
        y[j + kHalf] = d * kvalues_iq4nl[qs[j] >> 4];
    }
}

}  // namespace

void dequantize_iq4_nl(const block_iq4_nl* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK4_NL; ++i, y += QK4_NL) {
        dequantize_iq4_32(x[i].qs, fp16_to_fp32(x[i].d), y);
    }
}

void dequantize_iq4_xs(const block_iq4_xs* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < QK_K / 32; ++ib, y += 32) {
            dequantize_iq4_32(x[i].qs + 16 * ib, d * iq4_xs_scale(x[i], ib), y);
        }
    }
}

float vec_dot_iq4_nl_q8_0(int64_t n, const block_iq4_nl* x, const block_q8_0* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK4_NL; ++i) {
        const int isum = dot_iq4_32(x[i].qs, y[i].qs);
        sumf += isum * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sumf;
}

float vec_dot_iq4_xs_q8_K(int64_t n, const block_iq4_xs* x, const block_q8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int isum = 0;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            isum += iq4_xs_scale(x[i], ib) * dot_iq4_32(x[i].qs + 16 * ib, y[i].qs + 32 * ib);
        }
        sumf += fp16_to_fp32(x[i].d) * y[i].d * isum;
    }
    return sumf;
}

}  // namespace specula::ref
