// Row-wise float operations of the forward pass, written to round like ggml's CPU ops so that
// F32 models match llama.cpp to ~1e-6: RMSNorm sums squares in double, softmax sums exponentials
// in double and scales by the reciprocal. Each function works on one row; callers loop over
// tokens, so a token's result never depends on the batch it came in.
#pragma once

#include <cstdint>

namespace specula {

// y = x / sqrt(mean(x^2) + eps) * w (y may alias x).
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);

// x = softmax(x) in place.
void softmax(float* x, int64_t n);

// x = softmax(x) in place with one more logit `sink` in the denominator (gpt-oss's attention
// sinks, as ggml's soft_max with sinks: the max includes the sink, exp(sink - max) adds to the
// sum).
void softmax_sink(float* x, int64_t n, float sink);

// g = silu(g) * u. Where the ISA has it, the kernel table's vectorised loop (kernels/table.h
// best_activation; a few ulp from the libm loop here), as gelu_mul.
void silu_mul(float* g, const float* u, int64_t n);

// g = gelu(g) * u, GELU's tanh approximation as ggml computes it:
// 0.5 v (1 + tanh(sqrt(2/pi) v (1 + 0.044715 v^2))), v itself from 10 up and 0 from -10 down.
void gelu_mul(float* g, const float* u, int64_t n);

// x = cap * tanh(x / cap) (gemma2's logit soft-capping).
void softcap(float* x, int64_t n, float cap);

// gpt-oss's clamped SwiGLU (ggml's swiglu_oai, alpha 1.702, limit 7):
// g' = min(g, 7), u' = clamp(u, -7, 7), g = g' * sigmoid(1.702 g') * (u' + 1).
void swiglu_oai(float* g, const float* u, int64_t n);

// y += x.
void add_into(float* y, const float* x, int64_t n);

// y = x . w over n elements, fixed summation order (used by attention).
float dot_f32(const float* x, const float* w, int64_t n);

// y += a * x.
void axpy(float a, const float* x, float* y, int64_t n);

}  // namespace specula
