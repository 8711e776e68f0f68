// RoPE angles and rotation (see rope.h).
#include "model/rope.h"

#include <cmath>

namespace specula {

void rope_angles(const RopeParams& p, int pos, float* cs) {
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
    float theta = static_cast<float>(pos);
    for (int i = 0; i < p.n_rot / 2; ++i) {
        const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
        const float angle = p.freq_scale * (theta / ff);
        cs[2 * i + 0] = std::cos(angle);
        cs[2 * i + 1] = std::sin(angle);
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
