// Private to kernels/'s AVX-512 tile kernels (avx512/gemm_q8.cpp, avx512/gemm_kquants.cpp,
// gemm_amx.cpp): vpdpbusd with its 4 activation bytes broadcast from memory to every lane, and
// the store of a tile's 16 row outputs per token.
#pragma once

#include <immintrin.h>

#include <cstdint>

#if !defined(__AVX512VNNI__) || !defined(__AVX512BW__)
#error "tile512.h is for files compiled with AVX-512 BW and VNNI enabled"
#endif

namespace specula::simd {

namespace {

// The 4 bytes a broadcast reads, named with alignment 1 (activation quants are only 2-byte
// aligned in Q8_0 rows).
struct Bytes4 {
    uint8_t b[4];
};

// s += the byte dot products of w (unsigned) with the 4 signed bytes at p broadcast to every lane
// (GCC does not fold the broadcast into vpdpbusd's memory operand by itself).
__attribute__((always_inline)) inline __m512i dpbusd_bcast(__m512i s, __m512i w, const void* p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(w), "m"(*static_cast<const Bytes4*>(p)));
    return s;
}

// y[t * ldy + (r - lo)] = lane r of acc[t], for rows lo .. hi-1 of the tile and nt tokens.
__attribute__((always_inline)) inline void store_rows(const __m512* acc, int nt, int lo, int hi,
                                                      float* y, int64_t ldy) {
    for (int t = 0; t < nt; ++t) {
        if (lo == 0 && hi == 16) {
            _mm512_storeu_ps(y + t * ldy, acc[t]);
        } else {
            alignas(64) float tmp[16];
            _mm512_store_ps(tmp, acc[t]);
            for (int r = lo; r < hi; ++r) y[t * ldy + (r - lo)] = tmp[r];
        }
    }
}

template <int NT>
__attribute__((always_inline)) inline void store_rows(const __m512 (&acc)[NT], int lo, int hi,
                                                      float* y, int64_t ldy) {
    store_rows(acc, NT, lo, hi, y, ldy);
}

}  // namespace

}  // namespace specula::simd
