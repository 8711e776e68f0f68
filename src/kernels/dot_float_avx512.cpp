// AVX-512 kernels for the float weight types (F32, F16, BF16 against activations of the same
// type), several weight rows and tokens at a time (see float_rows_kernel in kernels/dot_kernels.h).
//
// Every output y[t][r] is one 16-lane accumulator chain: for each 16 columns in order (the last
// n % 16 masked, the missing lanes zero), acc = fma(w, a, acc); then the fixed horizontal sum
// hsum16. A register tile of R rows x T tokens runs R * T such chains side by side (each weight
// vector converted once and used for T tokens, each activation vector converted once and used
// for R rows), so the tile shape only changes how many chains share the loop, never the
// operations of one chain: y[t][r] has the same bits for any ntok, any row count and any thread
// split (batch invariance). The single-token decode tile is 8 rows (8 independent chains hide
// the FMA latency without splitting a chain), verify and prompt tiles are up to 4 rows x 6
// tokens (24 accumulators of the 32 zmm registers).
//
// Results differ from the AVX2 level (two 8-lane chains per token) only by summation order.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/dot_kernels.h"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__)
#error "dot_float_avx512.cpp must be compiled with AVX-512 F/BW/DQ enabled"
#endif

namespace specula::simd {
namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

// 16 elements at p (or the first k of them, the rest zero) as 16 floats.
struct LoadF32 {
    using T = float;
    static SPECULA_INLINE __m512 load(const float* p) { return _mm512_loadu_ps(p); }
    static SPECULA_INLINE __m512 load(const float* p, __mmask16 m) {
        return _mm512_maskz_loadu_ps(m, p);
    }
};
struct LoadF16 {
    using T = uint16_t;
    static SPECULA_INLINE __m512 load(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static SPECULA_INLINE __m512 load(const uint16_t* p, __mmask16 m) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    }
};
struct LoadBF16 {
    using T = uint16_t;
    static SPECULA_INLINE __m512 widen(__m256i h) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static SPECULA_INLINE __m512 load(const uint16_t* p) {
        return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static SPECULA_INLINE __m512 load(const uint16_t* p, __mmask16 m) {
        return widen(_mm256_maskz_loadu_epi16(m, p));
    }
};

// The fixed-order horizontal sum of one chain: 16 -> 8 -> 4 -> 2 -> 1 lanes, halves added.
SPECULA_INLINE float hsum16(__m512 v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Calls f(integral_constant<int, k>) for a run-time k in 1..N.
template <int N, class F>
SPECULA_INLINE void with_size(int k, F&& f) {
    if constexpr (N == 1) {
        f(std::integral_constant<int, 1>{});
    } else if (k == N) {
        f(std::integral_constant<int, N>{});
    } else {
        with_size<N - 1>(k, f);
    }
}

struct Tile {
    int64_t n;
    const uint8_t* w;  // first row
    size_t ws;         // bytes between rows
    const uint8_t* a;  // first token
    size_t as;         // bytes between tokens
    float* y;          // y[t * ldy + r]
    int64_t ldy;
};

// R rows x T tokens, R * T chains.
template <class L, int R, int T>
__attribute__((noinline)) void tile(const Tile& k) {
    using E = typename L::T;
    const E* w[R];
    const E* a[T];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const E*>(k.w + r * k.ws);
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const E*>(k.a + t * k.as);
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    // The next tile's rows (contiguous after this tile's) are asked for in order, a proportional
    // share per step, so memory sees one sequential stream rather than R interleaved ones.
    constexpr int kLinesPerStep = R * static_cast<int>(sizeof(E)) / 2;  // 32 elements x R rows
    const char* next = reinterpret_cast<const char*>(k.w) + R * k.ws;
    for (; i + 32 <= k.n; i += 32) {
        const char* pf = next + (i / 32) * kLinesPerStep * 64;
        for (int l = 0; l < kLinesPerStep; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        for (int h = 0; h < 32; h += 16) {
            __m512 wv[R];
            for (int r = 0; r < R; ++r) wv[r] = L::load(w[r] + i + h);
            for (int t = 0; t < T; ++t) {
                const __m512 av = L::load(a[t] + i + h);
                for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
            }
        }
    }
    for (; i + 16 <= k.n; i += 16) {
        __m512 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = L::load(w[r] + i);
        for (int t = 0; t < T; ++t) {
            const __m512 av = L::load(a[t] + i);
            for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    if (i < k.n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (k.n - i)) - 1);
        __m512 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = L::load(w[r] + i, m);
        for (int t = 0; t < T; ++t) {
            const __m512 av = L::load(a[t] + i, m);
            for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    for (int t = 0; t < T; ++t) {
        for (int r = 0; r < R; ++r) k.y[t * k.ldy + r] = hsum16(acc[r][t]);
    }
}

// Rows per tile for T tokens: 8 chains for one token, at most 24 accumulators otherwise.
#ifndef SPECULA_DECODE_ROWS
#define SPECULA_DECODE_ROWS 8
#endif
template <int T>
constexpr int kRowsFor = T == 1   ? SPECULA_DECODE_ROWS
                         : T == 2 ? 6
                                  : 4;
constexpr int kMaxTokens = 6;

// All rows for the T tokens at k.a: full tiles, then one narrower tile for the rest.
template <class L, int T>
SPECULA_INLINE void row_tiles(Tile k, int nrows) {
    constexpr int R = kRowsFor<T>;
    int r = 0;
    for (; r + R <= nrows; r += R) {
        tile<L, R, T>(k);
        k.w += R * k.ws;
        k.y += R;
    }
    if (r < nrows) with_size<R - 1>(nrows - r, [&](auto rr) { tile<L, rr(), T>(k); });
}

// Tokens in balanced groups of at most kMaxTokens (9 = 5 + 4, 512 = 2 x 5 + 84 x 6): the weight
// rows (a thread's chunk, a few tens of KiB) stay in cache while every group passes over them.
template <class L>
void float_rows(int64_t n, const void* w, size_t w_stride, int nrows, const void* a,
                size_t a_stride, int ntok, float* y, int64_t ldy) {
    const Tile base{
        n,  static_cast<const uint8_t*>(w), w_stride, static_cast<const uint8_t*>(a), a_stride, y,
        ldy};
    for (int t = 0; t < ntok;) {
        const int left = ntok - t;
        const int groups = (left + kMaxTokens - 1) / kMaxTokens;
        const int nt = (left + groups - 1) / groups;
        Tile k = base;
        k.a += static_cast<size_t>(t) * a_stride;
        k.y += static_cast<int64_t>(t) * ldy;
        with_size<kMaxTokens>(nt, [&](auto tt) { row_tiles<L, tt()>(k, nrows); });
        t += nt;
    }
}

// One row: the VecDotFn view of the same chains, out[t] = y[t][0].
template <class L>
void float_vec_dot(int64_t n, const void* w, const void* a, size_t a_stride, int ntok, float* out) {
    float_rows<L>(n, w, 0, 1, a, a_stride, ntok, out, 1);
}

}  // namespace

FloatRowsFn avx512_float_rows(GGMLType wt) {
    switch (wt) {
        case GGMLType::F32:
            return &float_rows<LoadF32>;
        case GGMLType::F16:
            return &float_rows<LoadF16>;
        case GGMLType::BF16:
            return &float_rows<LoadBF16>;
        default:
            return nullptr;
    }
}

VecDotFn avx512_float_vec_dot(GGMLType wt) {
    switch (wt) {
        case GGMLType::F32:
            return &float_vec_dot<LoadF32>;
        case GGMLType::F16:
            return &float_vec_dot<LoadF16>;
        case GGMLType::BF16:
            return &float_vec_dot<LoadBF16>;
        default:
            return nullptr;
    }
}

}  // namespace specula::simd
