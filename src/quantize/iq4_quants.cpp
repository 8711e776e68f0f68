// IQ4_NL and IQ4_XS quantization without an importance matrix, as ggml's quantize_iq4_nl /
// quantize_iq4_xs do it (quantize/weight_quants.h): each 32-element block maps its elements to
// the nearest of the 16 non-linear levels (kvalues_iq4nl) for 15 candidate scales around
// max / -127 and keeps the least-squares scale with the best fit (weights x^2). IQ4_NL stores
// that scale as f16 per block; IQ4_XS stores the eight blocks' scales as 6-bit multiples of a
// super-block scale and maps the elements again against the stored ones.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quantize/weight_quants.h"

namespace specula::quant {

namespace {

constexpr float kGroupMaxEps = 1e-15f;
constexpr int kTries = 7;

// The index of the level nearest to x (the lower one on a tie of distances, as ggml).
int nearest_level(float x) {
    const int8_t* v = kvalues_iq4nl;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < v[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// The weighted least-squares sums of x against the levels x * id maps to.
void level_sums(const float* x, const float* w, float id, float* sumqx, float* sumq2, uint8_t* L) {
    *sumqx = *sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        const int l = nearest_level(id * x[j]);
        if (L) L[j] = static_cast<uint8_t>(l);
        const float q = kvalues_iq4nl[l];
        *sumqx += w[j] * q * x[j];
        *sumq2 += w[j] * q * q;
    }
}

// The best scale of one 32-element block (0 for an all-zero block, whose levels are not set).
float block_scale(const float* x, uint8_t* L) {
    float w[32];
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        w[j] = x[j] * x[j];
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    if (amax < kGroupMaxEps) return 0;
    const int8_t v0 = kvalues_iq4nl[0];
    float d = -max / v0;
    float sumqx, sumq2;
    level_sums(x, w, 1 / d, &sumqx, &sumq2, L);
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int t = -kTries; t <= kTries; ++t) {
        level_sums(x, w, (t + v0) / max, &sumqx, &sumq2, nullptr);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

// 32 levels into 16 bytes: element j in the low nibble of byte j, element j + 16 in the high one.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
    for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

void map_levels(const float* x, float id, uint8_t* L) {
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_level(id * x[j]));
}

void iq4_xs_block(const float* x, block_iq4_xs& y) {
    uint8_t L[QK_K] = {};
    float scales[QK_K / 32];
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        scales[ib] = block_scale(x + 32 * ib, L + 32 * ib);
        if (std::fabs(scales[ib]) > amax_scale) {
            amax_scale = std::fabs(scales[ib]);
            max_scale = scales[ib];
        }
    }
    std::memset(&y, 0, sizeof(y));
    const float d = -max_scale / 32;
    y.d = fp32_to_fp16(d);
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        int l = std::clamp(nearest_int(id * scales[ib]), -32, 31);
        const float dl = d * l;
        map_levels(x + 32 * ib, dl ? 1 / dl : 0.f, L + 32 * ib);
        l += 32;
        y.scales_l[ib / 2] |= static_cast<uint8_t>((l & 0xF) << (4 * (ib % 2)));
        y.scales_h |= static_cast<uint16_t>((l >> 4) << (2 * ib));
    }
    for (int i = 0; i < QK_K / 32; ++i) pack_nibbles(L + 32 * i, y.qs + 16 * i);
}

}  // namespace

void quantize_iq4_nl(const float* x, block_iq4_nl* y, int64_t n) {
    for (int64_t b = 0; b < n / QK4_NL; ++b, x += QK4_NL) {
        uint8_t L[QK4_NL];
        const float d = block_scale(x, L);
        y[b].d = fp32_to_fp16(d);
        map_levels(x, d ? 1 / d : 0, L);
        pack_nibbles(L, y[b].qs);
    }
}

void quantize_iq4_xs(const float* x, block_iq4_xs* y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; ++b) iq4_xs_block(x + b * QK_K, y[b]);
}

}  // namespace specula::quant
