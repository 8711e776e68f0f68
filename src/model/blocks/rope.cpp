// RoPE angles and rotation (see rope.h).
#include "model/blocks/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace specula {

namespace {

// The dimension at which a wavelength fits n_ctx_orig / beta times (YaRN's find_correction_dim).
float yarn_corr_dim(int n_rot, int n_ctx_orig, float beta, float base) {
    return static_cast<float>(n_rot) *
           std::log(static_cast<float>(n_ctx_orig) / (beta * 2 * std::numbers::pi_v<float>)) /
           (2 * std::log(base));
}

}  // namespace

void rope_yarn_corr_dims(int n_rot, int n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]) {
    const float start = std::floor(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
    const float end = std::ceil(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
    dims[0] = std::max(0.0f, start);
    dims[1] = std::min(static_cast<float>(n_rot - 1), end);
}

void rope_angles(const RopeParams& p, int pos, float* cs) {
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    float theta = static_cast<float>(pos);
    for (int i = 0; i < p.n_rot / 2; ++i) {
        const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
        const float extrap = theta / ff;
        float angle = p.freq_scale * extrap;
        if (p.ext_factor != 0.0f) {
            const float y = (static_cast<float>(i) - p.corr_dims[0]) /
                            std::max(0.001f, p.corr_dims[1] - p.corr_dims[0]);
            const float mix = (1 - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
            angle = angle * (1 - mix) + extrap * mix;
        }
        cs[2 * i + 0] = std::cos(angle) * mscale;
        cs[2 * i + 1] = std::sin(angle) * mscale;
        theta *= theta_scale;
    }
}

void rope_apply(const RopeParams& p, const float* cs, float* x, int n_heads, int head_dim) {
    const int half = p.n_rot / 2;
    for (int h = 0; h < n_heads; ++h) {
        float* v = x + static_cast<int64_t>(h) * head_dim;
        for (int i = 0; i < half; ++i) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            const int a = p.neox ? i : 2 * i;
            const int b = p.neox ? i + half : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

}  // namespace specula
