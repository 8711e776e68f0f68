// Private to kernels/'s AVX-512 Q4_K tile kernels (avx512/gemm_kquants.cpp, amx/gemm_amx.cpp):
// where a super-block's activations are (kq_prepare_acts), and the float steps of a packed Q4_K
// super-block (kernels/layout/repack_k.h) both kernels share, so that they give the same bits.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/layout/repack_k.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512BW__)
#error "q4k_steps.h is for files compiled with AVX-512 BW and VNNI enabled"
#endif

namespace specula::simd {

namespace {

// Super-block b of a group's activations (kq_prepare_acts): token t's quants at q + 256 t, its
// scale d[t] and its corr entries at corr + kKqCorr t, all from one pointer each.
struct ActsAt {
    const int8_t* q;
    const float* d;
    const int32_t* corr;
    ActsAt(const PackedActs& a, int64_t b) {
        const size_t ntot = a.stride / 256;
        q = reinterpret_cast<const int8_t*>(a.q + b * a.stride);
        d = a.d + b * ntot;
        corr = a.corr + b * ntot * kKqCorr;
    }
    // The same super-block from token t of the group on.
    ActsAt from_token(int t) const {
        ActsAt r = *this;
        r.q += 256 * t, r.d += t, r.corr += kKqCorr * t;
        return r;
    }
};

__attribute__((always_inline)) inline __m512 fp16x16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

// The mins term of Q4_K super-block sb for nt tokens, first: imin = sum_s m_s * c_s (c_s =
// bsum_2s + bsum_2s+1), by vpdpwssd of (m_2j, m_2j+1) with the pair (c_2j, c_2j+1), then
// acc[t] = fma(float(imin), -(dmin_w * d_a), acc[t]).
__attribute__((always_inline)) inline void q4k_mins(const uint8_t* sb, const ActsAt& x, int nt,
                                                    __m512* acc) {
    __m512i mp[4];
    for (int j = 0; j < 4; ++j) {
        const __m512i m0 = _mm512_cvtepu8_epi32(
            _mm_load_si128(reinterpret_cast<const __m128i*>(sb + 192 + 32 * j)));
        const __m512i m1 = _mm512_cvtepu8_epi32(
            _mm_load_si128(reinterpret_cast<const __m128i*>(sb + 208 + 32 * j)));
        mp[j] = _mm512_or_si512(m0, _mm512_slli_epi32(m1, 16));
    }
    const __m512 dmin = fp16x16(sb + 32);
    for (int t = 0; t < nt; ++t) {
        const int32_t* cp = x.corr + kKqCorr * t + kKqMinPairs;  // (c_2j, c_2j+1)
        __m512i im = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) im = _mm512_dpwssd_epi32(im, mp[j], _mm512_set1_epi32(cp[j]));
        // fma(imin, -(dmin * d), acc) as fnmadd(imin, dmin * d, acc): the same value (negation
        // is exact), and d broadcast from memory (-d was a scalar negation and a broadcast from a
        // register per token and super-block, on the vector ports the kernel is bound by).
        acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(im),
                                  _mm512_mul_ps(dmin, _mm512_set1_ps(x.d[t])), acc[t]);
    }
}

// The last step of super-block sb: acc[t] = fma(float(isum[t]), d_w * d_a, acc[t]).
__attribute__((always_inline)) inline void q4k_finish(const uint8_t* sb, const ActsAt& x, int nt,
                                                      const __m512i* isum, __m512* acc) {
    const __m512 dw = fp16x16(sb);
    for (int t = 0; t < nt; ++t) {
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(x.d[t])), acc[t]);
    }
}

}  // namespace

}  // namespace specula::simd
