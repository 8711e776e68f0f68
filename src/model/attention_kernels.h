// The inner loops of attention (q.k dot products and the weighted sum of V rows), with an
// AVX2/FMA version picked once per process when the CPU (and SPECULA_SIMD) allow it. A process
// always uses the same version, so results never depend on the batch.
#pragma once

#include <cstdint>

namespace specula {

float dot_f32_avx2(const float* x, const float* y, int64_t n);
void axpy_avx2(float a, const float* x, float* y, int64_t n);

struct AttentionKernels {
    float (*dot)(const float* x, const float* y, int64_t n);
    void (*axpy)(float a, const float* x, float* y, int64_t n);
};

// The best kernels for this CPU, chosen on first use.
const AttentionKernels& attention_kernels();

}  // namespace specula
