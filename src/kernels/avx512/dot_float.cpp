// AVX-512 build of the float tile kernels (kernels/x86/float_tiles.inc): one 16-lane chain per
// output; the one- and two-token tiles are 8 rows, verify and prompt tiles up to 4 rows x 6 tokens
// (24 accumulators of the 32 zmm registers). Results differ from the AVX2 build (8-lane chains)
// only by summation order. registered only where the CPU has AVX-512.
// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialised variable) as the
// unused merge source, which -Wuninitialized would report at every call.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/isa_parts.h"
#include "kernels/layout/repack_float.h"
#include "kernels/x86/hsum.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/token_groups.h"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__)
#error "avx512/dot_float.cpp must be compiled with AVX-512 F/BW/DQ enabled"
#endif

namespace specula::simd {
namespace {

struct V {
    using reg = __m512;
    static constexpr int kLanes = 16;
    static constexpr int kMaxTokens = 6;
    static constexpr int rows_for(int t) { return t <= 2 ? 8 : 4; }
    static constexpr int kMaxGroup = 16;
    static constexpr int kAccs = 16;
    static __attribute__((always_inline)) reg bcast(const float* p) { return _mm512_set1_ps(*p); }
    static __attribute__((always_inline)) reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
    static __attribute__((always_inline)) reg loadf(const float* p) { return _mm512_loadu_ps(p); }
    static __attribute__((always_inline)) void storef(float* p, reg v) { _mm512_storeu_ps(p, v); }
    static __attribute__((always_inline)) reg zero() { return _mm512_setzero_ps(); }
    static __attribute__((always_inline)) reg fma(reg a, reg b, reg c) {
        return _mm512_fmadd_ps(a, b, c);
    }
    static __attribute__((always_inline)) float hsum(reg v) { return hsum16(v); }
    static __attribute__((always_inline)) __mmask16 first(int k) {
        return static_cast<__mmask16>((1u << k) - 1);
    }
    struct F32 {
        using T = float;
        static __attribute__((always_inline)) reg load(const float* p) {
            return _mm512_loadu_ps(p);
        }
        static __attribute__((always_inline)) reg load(const float* p, int k) {
            return _mm512_maskz_loadu_ps(first(k), p);
        }
    };
    struct F16 {
        using T = uint16_t;
        static __attribute__((always_inline)) reg load(const uint16_t* p) {
            return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        }
        static __attribute__((always_inline)) reg load(const uint16_t* p, int k) {
            return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(k), p));
        }
    };
    struct BF16 {
        using T = uint16_t;
        static __attribute__((always_inline)) reg widen(__m256i h) {
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
        static __attribute__((always_inline)) reg load(const uint16_t* p) {
            return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        }
        static __attribute__((always_inline)) reg load(const uint16_t* p, int k) {
            return widen(_mm256_maskz_loadu_epi16(first(k), p));
        }
    };
};

#include "kernels/x86/float_tiles.inc"
// After the tiles: the panels use their loaders.
#include "kernels/x86/float_panels.inc"

}  // namespace

}  // namespace specula::simd

namespace specula::avx512 {

void add_dot_float(KernelTable& t) {
    simd::add_float_kernels(t, Isa::AVX512);
}

}  // namespace specula::avx512
