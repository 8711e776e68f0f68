// Scalar reference for MXFP4 (OCP microscaling FP4, ggml type 39): 32-element blocks of E2M1
// nibbles (through kvalues_mxfp4, the values doubled) with one E8M0 exponent, dotted with Q8_0
// activations. The scale 2^(e - 128) is a power of two, so dequantized values are exact.
// Dot product: the exact integer sum per block, times (scale * the activation's d) in float,
// accumulated in block order. The quantizer is ggml's round-to-nearest one: e from the block's
// largest magnitude (floor(log2(amax)) - 2 + 127, so amax lands in [4, 8) times 2^(e - 127)),
// each value to the nearest level, the first on ties.
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/ref/quants_internal.h"

namespace specula::ref {

namespace {

constexpr int kHalf = QK_MXFP4 / 2;

int dot_mxfp4_32(const uint8_t* qs, const int8_t* a) {
    int sum = 0;
    for (int j = 0; j < kHalf; ++j) {
        sum += kvalues_mxfp4[qs[j] & 0x0F] * a[j];
        sum += kvalues_mxfp4[qs[j] >> 4] * a[j + kHalf];
    }
    return sum;
}

// The level index nearest x / d (the first of equals).
uint8_t nearest_level(float d, float x) {
    int best = 0;
    float best_err = std::fabs(x - d * kvalues_mxfp4[0]);
    for (int j = 1; j < 16; ++j) {
        const float err = std::fabs(x - d * kvalues_mxfp4[j]);
        if (err < best_err) {
            best_err = err;
            best = j;
        }
    }
    return static_cast<uint8_t>(best);
}

}  // namespace

float mxfp4_scale(uint8_t e) {
    return std::bit_cast<float>(mxfp4_half_scale_bits(e));
}

void dequantize_mxfp4(const block_mxfp4* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_MXFP4; ++i, y += QK_MXFP4) {
        const float d = mxfp4_scale(x[i].e);
        for (int j = 0; j < kHalf; ++j) {
            y[j] = d * kvalues_mxfp4[x[i].qs[j] & 0x0F];
            y[j + kHalf] = d * kvalues_mxfp4[x[i].qs[j] >> 4];
        }
    }
}

void quantize_mxfp4(const float* x, block_mxfp4* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_MXFP4; ++i, x += QK_MXFP4) {
        std::memset(&y[i], 0, sizeof y[i]);
        float amax = 0.0f;
        for (int j = 0; j < QK_MXFP4; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        if (amax == 0.0f) continue;
        const int e = static_cast<int>(std::floor(std::log2(amax))) - 2 + 127;
        y[i].e = static_cast<uint8_t>(e);
        const float d = mxfp4_scale(y[i].e);
        for (int j = 0; j < kHalf; ++j) {
            y[i].qs[j] = nearest_level(d, x[j]) | (nearest_level(d, x[j + kHalf]) << 4);
        }
    }
}

float vec_dot_mxfp4_q8_0(int64_t n, const block_mxfp4* x, const block_q8_0* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
        const int isum = dot_mxfp4_32(x[i].qs, y[i].qs);
        sumf += isum * (mxfp4_scale(x[i].e) * fp16_to_fp32(y[i].d));
    }
    return sumf;
}

}  // namespace specula::ref
