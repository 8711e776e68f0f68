// Q4_K, Q5_K and Q6_K quantization without an importance matrix, as ggml's reference quantizers
// do it (quantize/weight_quants.h). Q4_K / Q5_K: each 32-element sub-block gets the scale and min
// (x ~ scale * q - min) with the least weighted squared error over a small grid of candidate
// scales; the eight scales and mins are then stored as 6-bit fractions of the super-block's
// largest, and the elements are rounded again against the stored values. Q6_K: each 16-element
// sub-block gets a signed scale (the best of 19 candidates around max / -32, weights x^2), stored
// as an int8 fraction of the largest.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quantize/weight_quants.h"

namespace specula::quant {

int nearest_int(float x) {
    return static_cast<int>(std::lrintf(x));
}

namespace {

constexpr float kGroupMaxEps = 1e-15f;

// The (scale, min) search of one sub-block of n elements with levels 0..nmax: x ~ scale * L - min,
// weighted by w. Starts from the full range, then tries nstep + 1 stretched grids (iscale from
// (rmin + nmax) / range in steps of rdelta) and keeps the least-squares fit with the least error.
// Returns the scale; *neg_min gets -min (>= 0). L gets the levels. As in ggml, a better fit's min
// replaces the range's lower end for the grids tried after it.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                    float rmin, float rdelta, int nstep) {
    float lo = x[0], hi = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        std::fill(L, L + n, uint8_t{0});
        *neg_min = -lo;
        return 0.f;
    }
    float iscale = nmax / (hi - lo);
    float scale = 1 / iscale;
    float min = lo;
    float best_err = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax));
        const float diff = scale * L[i] + lo - x[i];
        best_err += w[i] * (diff * diff);
    }
    uint8_t trial[32];
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (hi - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
            trial[i] = static_cast<uint8_t>(l);
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; ++i) {
            const float diff = this_scale * trial[i] + this_min - x[i];
            err += w[i] * (diff * diff);
        }
        if (err < best_err) {
            std::memcpy(L, trial, static_cast<size_t>(n));
            best_err = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

// Sub-block j's 6-bit scale and min from the 12-byte K-quant packing.
void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// The Q4_K / Q5_K super-block header: d, dmin and the packed scales from the eight sub-blocks'
// fits, then every element's level (0..nmax) against the stored scales into L.
void k4_header(const float* x, int nmax, float rmin, int nstep, fp16_t* d_out, fp16_t* dmin_out,
               uint8_t* packed, uint8_t* L) {
    float scales[8], mins[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        const float* xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
        max_scale = std::max(max_scale, scales[j]);
        max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::memset(packed, 0, K_SCALE_SIZE);
    for (int j = 0; j < 8; ++j) {
        const uint8_t ls =
            std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
        const uint8_t lm =
            std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
            packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
            packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
        }
    }
    *d_out = fp32_to_fp16(max_scale / 63.f);
    *dmin_out = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        scale_min_k4(j, packed, &sc, &m);
        const float d = fp16_to_fp32(*d_out) * sc;
        if (!d) continue;  // the fit's levels stay
        const float dm = fp16_to_fp32(*dmin_out) * m;
        for (int i = 0; i < 32; ++i)
            L[32 * j + i] =
                static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
    }
}

// Q6_K's sub-block search (ggml's make_qx_quants with weights x^2): levels -32..31 stored + 32.
float fit_signed_scale(const float* x, int8_t* L) {
    constexpr int n = 16, nmax = 32;
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        std::fill(L, L + n, int8_t{0});
        return 0.f;
    }
    const auto sums = [&](float iscale, float* sumlx, float* suml2, int8_t* levels) {
        *sumlx = *suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            if (levels) levels[i] = static_cast<int8_t>(l + nmax);
            const float w = x[i] * x[i];
            *sumlx += w * x[i] * l;
            *suml2 += w * l * l;
        }
    };
    float sumlx, suml2;
    sums(-nmax / max, &sumlx, &suml2, L);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        const float iscale = -(nmax + 0.1f * is) / max;
        sums(iscale, &sumlx, &suml2, nullptr);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            sums(iscale, &sumlx, &suml2, L);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void q6_K_block(const float* x, block_q6_K& y) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        scales[ib] = fit_signed_scale(x + 16 * ib, L + 16 * ib);
        if (std::fabs(scales[ib]) > max_abs_scale) {
            max_abs_scale = std::fabs(scales[ib]);
            max_scale = scales[ib];
        }
    }
    std::memset(&y, 0, sizeof(y));
    if (max_abs_scale < kGroupMaxEps) return;
    const float iscale = -128.f / max_scale;
    y.d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib)
        y.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = fp16_to_fp32(y.d) * y.scales[j];
        if (!d) continue;
        for (int i = 0; i < 16; ++i)
            L[16 * j + i] =
                static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
    }
    for (int half = 0; half < 2; ++half) {
        const int8_t* Lh = L + 128 * half;
        uint8_t* ql = y.ql + 64 * half;
        uint8_t* qh = y.qh + 32 * half;
        for (int l = 0; l < 32; ++l) {
            ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
            ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
            qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                         ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
        }
    }
}

}  // namespace

void quantize_q4_K(const float* x, block_q4_K* y, int64_t n) {
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        block_q4_K& out = y[b];
        k4_header(x, 15, -1.f, 20, &out.d, &out.dmin, out.scales, L);
        for (int j = 0; j < QK_K / 64; ++j)
            for (int l = 0; l < 32; ++l)
                out.qs[32 * j + l] =
                    static_cast<uint8_t>(L[64 * j + l] | (L[64 * j + l + 32] << 4));
    }
}

void quantize_q5_K(const float* x, block_q5_K* y, int64_t n) {
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        block_q5_K& out = y[b];
        k4_header(x, 31, -0.5f, 15, &out.d, &out.dmin, out.scales, L);
        std::memset(out.qh, 0, sizeof(out.qh));
        for (int j = 0; j < QK_K / 64; ++j) {
            const uint8_t m1 = static_cast<uint8_t>(1 << (2 * j)),
                          m2 = static_cast<uint8_t>(m1 << 1);
            for (int l = 0; l < 32; ++l) {
                int l1 = L[64 * j + l], l2 = L[64 * j + l + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    out.qh[l] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    out.qh[l] |= m2;
                }
                out.qs[32 * j + l] = static_cast<uint8_t>(l1 | (l2 << 4));
            }
        }
    }
}

void quantize_q6_K(const float* x, block_q6_K* y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; ++b) q6_K_block(x + b * QK_K, y[b]);
}

}  // namespace specula::quant
