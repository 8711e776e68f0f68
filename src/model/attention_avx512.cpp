// AVX-512 inner loops of blocked attention (see attention_kernels.h), for head sizes that are a
// multiple of 16 up to 128 (compiled with AVX-512 flags, called only when the CPU has them).
//
// A score is one 16-lane FMA chain over the head's 16-float pieces in order, then the fixed
// horizontal sum, times the scale; an output element is one FMA chain over the positions in
// order. A block of queries shares each K / V row load, but no query's chain depends on which
// other queries are in its block.
// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialised variable) as the
// unused merge source, which -Wuninitialized would report at every call.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <type_traits>

#include "model/attention_kernels.h"

namespace specula {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

SPECULA_INLINE float hsum16(__m512 v) {
    const __m256 s8 =
        _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_maskz_extractf32x8_ps(0xFF, v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// s[i][j] = scale * dot(q[i], row j of k) for j in [j0, j1), i < nq; NC 16-float pieces per head.
template <int NC>
void qk_block(const float* k, size_t ks, int j0, int j1, const float* const* q, int nq, float scale,
              float* const* s) {
    for (int j = j0; j < j1; ++j) {
        const float* kj = k + static_cast<size_t>(j) * ks;
        __m512 kv[NC];
        for (int c = 0; c < NC; ++c) kv[c] = _mm512_loadu_ps(kj + 16 * c);
        for (int i = 0; i < nq; ++i) {
            __m512 acc = _mm512_setzero_ps();
            for (int c = 0; c < NC; ++c) {
                acc = _mm512_fmadd_ps(_mm512_loadu_ps(q[i] + 16 * c), kv[c], acc);
            }
            s[i][j] = hsum16(acc) * scale;
        }
    }
}

// out[i] += sum over j in [j0, j1) of p[i][j] * row j of v, for NQ queries kept in registers.
template <int NC, int NQ>
__attribute__((noinline)) void pv_tile(const float* v, size_t vs, int j0, int j1,
                                       const float* const* p, float* const* out) {
    __m512 acc[NQ][NC];
    for (int i = 0; i < NQ; ++i) {
        for (int c = 0; c < NC; ++c) acc[i][c] = _mm512_loadu_ps(out[i] + 16 * c);
    }
    for (int j = j0; j < j1; ++j) {
        const float* vj = v + static_cast<size_t>(j) * vs;
        __m512 vv[NC];
        for (int c = 0; c < NC; ++c) vv[c] = _mm512_loadu_ps(vj + 16 * c);
        for (int i = 0; i < NQ; ++i) {
            const __m512 b = _mm512_set1_ps(p[i][j]);
            for (int c = 0; c < NC; ++c) acc[i][c] = _mm512_fmadd_ps(b, vv[c], acc[i][c]);
        }
    }
    for (int i = 0; i < NQ; ++i) {
        for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out[i] + 16 * c, acc[i][c]);
    }
}

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

template <int NC>
void pv_block(const float* v, size_t vs, int j0, int j1, const float* const* p, int nq,
              float* const* out) {
    constexpr int kMaxQ = NC > 24 ? 1 : 24 / NC;  // accumulators of the 32 zmm registers
    for (int i = 0; i < nq; i += kMaxQ) {
        with_size<kMaxQ>(nq - i < kMaxQ ? nq - i : kMaxQ,
                         [&](auto n) { pv_tile<NC, n()>(v, vs, j0, j1, p + i, out + i); });
    }
}

template <int NC>
BlockAttentionKernels kernels_for() {
    return {&qk_block<NC>, &pv_block<NC>};
}

}  // namespace

bool block_attention_avx512(int head_dim, BlockAttentionKernels* k) {
    if (head_dim <= 0 || head_dim % 16 != 0 || head_dim > 128) return false;
    switch (head_dim / 16) {
        case 1:
            *k = kernels_for<1>();
            break;
        case 2:
            *k = kernels_for<2>();
            break;
        case 3:
            *k = kernels_for<3>();
            break;
        case 4:
            *k = kernels_for<4>();
            break;
        case 5:
            *k = kernels_for<5>();
            break;
        case 6:
            *k = kernels_for<6>();
            break;
        case 7:
            *k = kernels_for<7>();
            break;
        default:
            *k = kernels_for<8>();
            break;
    }
    return true;
}

}  // namespace specula
