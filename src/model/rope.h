// Rotary position embedding as ggml computes it (ggml_rope_ext with ext_factor 0): for pair i,
// theta_i = freq_scale * (pos * base^(-2i/n_rot)) / freq_factor_i, where base^(-2/n_rot) is
// applied by repeated float multiplication exactly like ggml's rope cache, so angles round the
// same way. "normal" mode rotates adjacent pairs (x[2i], x[2i+1]); NEOX rotates (x[i],
// x[i + n_rot/2]). Dimensions at or beyond n_rot are left unchanged.
#pragma once

#include <cstdint>
#include <vector>

namespace specula {

struct RopeParams {
    int n_rot = 0;
    bool neox = false;
    float freq_base = 10000.f;
    float freq_scale = 1.f;
    const float* freq_factors = nullptr;  // n_rot/2 divisors (Llama 3 rope_freqs), or nullptr
};

// cs[2i], cs[2i+1] = cos, sin of pair i's angle at position `pos` (n_rot floats).
void rope_angles(const RopeParams& p, int pos, float* cs);

// Rotates `n_heads` consecutive heads of `head_dim` floats in x, using angles from rope_angles.
void rope_apply(const RopeParams& p, const float* cs, float* x, int n_heads, int head_dim);

}  // namespace specula
