// The FFN's elementwise activations, written as plain loops of selects and arithmetic that the
// compiler vectorises at the including ISA's width (kernels/avx2/activations.cpp,
// kernels/avx512/activations.cpp). libm's expf / tanhf are calls the vectoriser cannot widen; on
// Gemma's GeGLU they took ~10% of a decode step.
//
// exp_approx: x = n ln2 + r (|r| <= ln2 / 2), exp(r) by its Taylor polynomial to degree 7 (the
// remainder |r|^8 / 8! < 6e-9, under 0.1 ulp), 2^n put into the exponent bits; x is clamped to
// [-87, 88], where 2^n stays a normal float. Relative error ~2 ulp (the polynomial's rounding).
// silu and gelu follow kernels/ops.h's definitions (gelu's tanh approximation, v itself from 10 up
// and 0 from -10 down), with 0.5 (1 + tanh y) computed as 1 / (1 + exp(-2y)).
// Elementwise, so batch invariant.
#pragma once

#include <bit>
#include <cstdint>

namespace specula::simd {
namespace {

inline float exp_approx(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln2)
    // ln2 as a short high part (n * hi is exact) and the rest.
    const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

void silu_mul_vec(float* __restrict g, const float* __restrict u, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = g[i];
        const float s = v / (1.0f + exp_approx(-v));
        g[i] = (v < -88.0f ? 0.0f : s) * u[i];  // (where exp(-v) is past the clamp)
    }
}

void gelu_mul_vec(float* __restrict g, const float* __restrict u, int64_t n) {
    constexpr float kA = 0.044715f, kSqrt2OverPi = 0.79788456080286535587989211986876f;
    for (int64_t i = 0; i < n; ++i) {
        const float v = g[i];
        // 0.5 (1 + tanh y) = 1 / (1 + exp(-2y)): no cancellation where tanh y is near -1.
        const float y = kSqrt2OverPi * v * (1.0f + kA * v * v);
        float out = v / (1.0f + exp_approx(-2.0f * y));
        out = v >= 10.0f ? v : out;
        out = v <= -10.0f ? 0.0f : out;
        g[i] = out * u[i];
    }
}

// gpt-oss's clamped SwiGLU: x = min(g, 7), y = clamp(u, -7, 7), g = x sigmoid(1.702 x) (y + 1).
void swiglu_oai_vec(float* __restrict g, const float* __restrict u, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float x = g[i] < 7.0f ? g[i] : 7.0f;
        float y = u[i] < 7.0f ? u[i] : 7.0f;
        y = y > -7.0f ? y : -7.0f;
        const float s = x / (1.0f + exp_approx(-1.702f * x));
        g[i] = (x < -51.0f ? 0.0f : s) * (y + 1.0f);  // (where exp is past the clamp)
    }
}

}  // namespace
}  // namespace specula::simd
