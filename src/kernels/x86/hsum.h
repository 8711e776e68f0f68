// The fixed-order horizontal sums of 8 floats (AVX2: 8 -> 4 -> 2 -> 1 lanes, halves added) and of
// 16 (AVX-512: 16 -> 8, then the same), shared by the float tile and blocked attention kernels.
// Include it only from files compiled with AVX2 (or AVX-512) flags: the functions have internal
// linkage, so no copy is ever shared with code built for another level.
#pragma once

#include <immintrin.h>

namespace specula::simd {

[[gnu::always_inline]] static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
[[gnu::always_inline]] static inline float hsum16(__m512 v) {
    // maskz_extract: GCC 12's unmasked form passes an "undefined" register it then warns about.
    return hsum8(
        _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_maskz_extractf32x8_ps(0xFF, v, 1)));
}
#endif

}  // namespace specula::simd
