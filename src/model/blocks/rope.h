// Rotary position embedding as ggml computes it (ggml_rope_ext with ext_factor 0): for pair i,
// theta_i = freq_scale * (pos * base^(-2i/n_rot)) / freq_factor_i, where base^(-2/n_rot) is
// applied by repeated float multiplication exactly like ggml's rope cache, so angles round the
// same way. "normal" mode rotates adjacent pairs (x[2i], x[2i+1]); NEOX rotates (x[i],
// x[i + n_rot/2]). Dimensions at or beyond n_rot are left unchanged.
// YaRN (ext_factor != 0), as ggml's rope_yarn: pair i's angle mixes the interpolated angle
// (freq_scale * theta) and the extrapolated one (theta) by ramp(i) * ext_factor, where
// ramp(i) = 1 - clamp((i - corr_dims[0]) / max(0.001, corr_dims[1] - corr_dims[0]), 0, 1), and cos
// and sin are scaled by attn_factor * (1 + 0.1 ln(1 / freq_scale)). Without YaRN they are scaled by
// attn_factor alone (rope.scaling.attn_factor, phi3 LongRoPE and mistral3 set it).
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
    float ext_factor = 0.f;               // YaRN's extrapolation mix (1 with YaRN, else 0)
    float attn_factor = 1.f;              // YaRN's magnitude scale before its log term
    float corr_dims[2] = {0.f, 0.f};      // YaRN's ramp, from rope_yarn_corr_dims
};

// YaRN's correction dimensions, as ggml_rope_yarn_corr_dims: the pair indices where the ramp
// starts and ends for the original context n_ctx_orig and the betas (ggml's defaults 32 and 1).
void rope_yarn_corr_dims(int n_rot, int n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]);

// cs[2i], cs[2i+1] = cos, sin of pair i's angle at position `pos` (n_rot floats).
void rope_angles(const RopeParams& p, int pos, float* cs);

// Rotates `n_heads` consecutive heads of `head_dim` floats in x, using angles from rope_angles.
void rope_apply(const RopeParams& p, const float* cs, float* x, int n_heads, int head_dim);

}  // namespace specula
