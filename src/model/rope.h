// Rotary position embedding as ggml computes it (ggml_rope_ext): for pair i,
// theta_i = freq_scale * (pos * base^(-2i/n_rot)) / freq_factor_i, where base^(-2/n_rot) is
// applied by repeated float multiplication exactly like ggml's rope cache, so angles round the
// same way. With YaRN (ext_factor != 0) each pair's angle mixes that interpolated angle with the
// unscaled one by a ramp over the correction dimensions, and the magnitude grows by
// 1 + 0.1 ln(1 / freq_scale); every cos and sin is multiplied by attn_factor. "normal" mode rotates
// adjacent pairs (x[2i], x[2i+1]); NEOX rotates (x[i], x[i + n_rot/2]). Dimensions at or beyond
// n_rot are left unchanged.
#pragma once

#include <cstdint>
#include <vector>

namespace specula {

struct RopeParams {
    int n_rot = 0;
    bool neox = false;
    float freq_base = 10000.f;
    float freq_scale = 1.f;
    const float* freq_factors = nullptr;  // n_rot/2 divisors (rope_freqs, LongRoPE), or nullptr
    float ext_factor = 0.f;               // YaRN: 0 off
    float attn_factor = 1.f;              // multiplies cos and sin
    float corr_dims[2] = {0.f, 0.f};      // YaRN ramp (rope_yarn_corr_dims)
};

// ggml_rope_yarn_corr_dims: the first and last dimension pair the YaRN ramp runs over, for a
// model trained on n_ctx_orig positions.
void rope_yarn_corr_dims(int n_rot, int n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]);

// cs[2i], cs[2i+1] = cos, sin of pair i's angle at position `pos` (n_rot floats).
void rope_angles(const RopeParams& p, int pos, float* cs);

// Rotates `n_heads` consecutive heads of `head_dim` floats in x, using angles from rope_angles.
void rope_apply(const RopeParams& p, const float* cs, float* x, int n_heads, int head_dim);

}  // namespace specula
