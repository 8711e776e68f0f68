// Row operations (see ops.h): scalar loops, but silu_mul / gelu_mul, which take the kernel
// table's vectorised activations where the ISA has them. Summation orders are fixed, independent of
// the batch.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/table.h"

namespace specula {

namespace {

// The kernel table's vectorised activations at the active ISA (null at the scalar level).
const ActivationEntry& activations() {
    static const ActivationEntry e = best_activation();
    return e;
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
    // Sixteen partial double sums (they vectorise), combined in a fixed tree: the order depends
    // on n only. (One running sum waits on each add: 9 rows of 4096 took 41-42 us against 25-26
    // us this way, on an Intel Xeon at x86-64's baseline; a 9-token pass of an 8B-shaped model
    // makes 648 such rows and 12,960 of 128, with the pool's other thread idle meanwhile.)
    double acc[16] = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int k = 0; k < 16; ++k) acc[k] += static_cast<double>(x[i + k] * x[i + k]);
    }
    for (int k = 0; i < n; ++i, ++k) acc[k] += static_cast<double>(x[i] * x[i]);
    for (int k = 0; k < 8; ++k) acc[k] += acc[k + 8];
    const double sum =
        ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] * scale) * w[j];
}

void softmax(float* x, int64_t n) {
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(x[i] - max);
        sum += static_cast<double>(e);
        x[i] = e;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void softmax_sink(float* x, int64_t n, float sink) {
    float max = sink;
    for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(x[i] - max);
        sum += static_cast<double>(e);
        x[i] = e;
    }
    sum += static_cast<double>(std::exp(sink - max));
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu_oai(float* g, const float* u, int64_t n) {
    if (const auto f = activations().swiglu_oai) return f(g, u, n);
    constexpr float kAlpha = 1.702f, kLimit = 7.0f;
    for (int64_t i = 0; i < n; ++i) {
        const float x = std::min(g[i], kLimit);
        const float y = std::max(std::min(u[i], kLimit), -kLimit);
        g[i] = x / (1.0f + std::exp(kAlpha * -x)) * (y + 1.0f);
    }
}

void silu_mul(float* g, const float* u, int64_t n) {
    if (const auto f = activations().silu_mul) return f(g, u, n);
    for (int64_t i = 0; i < n; ++i) {
        const float v = g[i];
        g[i] = (v / (1.0f + std::exp(-v))) * u[i];
    }
}

void gelu_mul(float* g, const float* u, int64_t n) {
    if (const auto f = activations().gelu_mul) return f(g, u, n);
    constexpr float kA = 0.044715f, kSqrt2OverPi = 0.79788456080286535587989211986876f;
    for (int64_t i = 0; i < n; ++i) {
        const float v = g[i];
        float y;
        if (v <= -10.0f) {
            y = 0.0f;
        } else if (v >= 10.0f) {
            y = v;
        } else {
            y = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + kA * v * v)));
        }
        g[i] = y * u[i];
    }
}

void softcap(float* x, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void add_into(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

float dot_f32(const float* x, const float* w, int64_t n) {
    // Eight independent partial sums (vectorisable), combined in a fixed tree.
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; ++k) acc[k] += x[i + k] * w[i + k];
    }
    for (int k = 0; i < n; ++i, ++k) acc[k] += x[i] * w[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void axpy(float a, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace specula
