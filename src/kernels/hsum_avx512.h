// The fixed-order horizontal sum of 16 floats (16 -> 8 -> 4 -> 2 -> 1 lanes, halves added) shared
// by the AVX-512 translation units (kernels/dot_float_avx512.cpp, model/attention_avx512.cpp).
// Include it only from files compiled with AVX-512 flags: it has internal linkage, so no copy
// of it is ever shared with code built for a lower level.
#pragma once

#include <immintrin.h>

namespace specula::simd {

[[gnu::always_inline]] static inline float hsum16(__m512 v) {
    // maskz_extract: GCC 12's unmasked form passes an "undefined" register it then warns about.
    const __m256 s8 =
        _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_maskz_extractf32x8_ps(0xFF, v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

}  // namespace specula::simd
