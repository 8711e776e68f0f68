// AVX2 + FMA + F16C build of the float tile kernels (kernels/x86/float_tiles.inc): one 8-lane
// chain per output; tiles of 4 rows for one or two tokens, 3 x 3, and 2 rows x up to 6 tokens
// (at most 13 of the 16 ymm registers). A tail of n % 8 columns is copied into a zeroed buffer.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/isa_parts.h"
#include "kernels/layout/repack_float.h"
#include "kernels/x86/hsum.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/token_groups.h"

namespace specula::simd {
namespace {

struct V {
    using reg = __m256;
    static constexpr int kLanes = 8;
    static constexpr int kMaxTokens = 6;
    static constexpr int rows_for(int t) { return t <= 2 ? 4 : t == 3 ? 3 : 2; }
    static constexpr int kMaxGroup = 6;
    static constexpr int kAccs = 12;
    static __attribute__((always_inline)) reg bcast(const float* p) {
        return _mm256_broadcast_ss(p);
    }
    static __attribute__((always_inline)) reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
    static __attribute__((always_inline)) reg loadf(const float* p) { return _mm256_loadu_ps(p); }
    static __attribute__((always_inline)) void storef(float* p, reg v) { _mm256_storeu_ps(p, v); }
    static __attribute__((always_inline)) reg zero() { return _mm256_setzero_ps(); }
    static __attribute__((always_inline)) reg fma(reg a, reg b, reg c) {
        return _mm256_fmadd_ps(a, b, c);
    }
    static __attribute__((always_inline)) float hsum(reg v) { return hsum8(v); }
    // The first k < 8 elements at p, zero-padded to 8.
    template <class E>
    static __attribute__((always_inline)) void part(const E* p, int k, E (&buf)[8]) {
        for (int j = 0; j < 8; ++j) buf[j] = j < k ? p[j] : E{0};
    }
    struct F32 {
        using T = float;
        static __attribute__((always_inline)) reg load(const float* p) {
            return _mm256_loadu_ps(p);
        }
        static __attribute__((always_inline)) reg load(const float* p, int k) {
            float b[8];
            part(p, k, b);
            return load(b);
        }
    };
    struct F16 {
        using T = uint16_t;
        static __attribute__((always_inline)) reg load(const uint16_t* p) {
            return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        }
        static __attribute__((always_inline)) reg load(const uint16_t* p, int k) {
            uint16_t b[8];
            part(p, k, b);
            return load(b);
        }
    };
    struct BF16 {
        using T = uint16_t;
        static __attribute__((always_inline)) reg load(const uint16_t* p) {
            const __m256i v =
                _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
            return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        }
        static __attribute__((always_inline)) reg load(const uint16_t* p, int k) {
            uint16_t b[8];
            part(p, k, b);
            return load(b);
        }
    };
};

#include "kernels/x86/float_tiles.inc"
// After the tiles: the panels use their loaders.
#include "kernels/x86/float_panels.inc"

}  // namespace

}  // namespace specula::simd

namespace specula::avx2 {

void add_dot_float(KernelTable& t) {
    simd::add_float_kernels(t, Isa::AVX2);
}

}  // namespace specula::avx2
