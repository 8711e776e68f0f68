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

#include "kernels/hsum_avx512.h"
#include "model/attention_kernels.h"

namespace specula {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

using simd::hsum16;

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

// e^x for x <= 0, 16 lanes: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact
// product), e^r by its Taylor polynomial to degree 7 (relative error < 2e-8 before rounding),
// times 2^n by vscalefps (which also flushes e^x below the float range to 0).
SPECULA_INLINE __m512 exp_nonpositive(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.f / 5040.f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 720.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(p, n);
}

// x[0..n) = softmax(x): the maximum, e^(x - max) (above), their sum in double precision in a
// fixed order (16 columns at a time into two 8-lane double accumulators, then a fixed tree), and
// the products with 1 / sum. The result depends only on the row.
void softmax_row(float* x, int n) {
    __m512 mx = _mm512_set1_ps(-__builtin_inff());
    int i = 0;
    for (; i + 16 <= n; i += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(x + i));
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    if (i < n) mx = _mm512_mask_max_ps(mx, tail, mx, _mm512_maskz_loadu_ps(tail, x + i));
    const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (i = 0; i + 16 <= n; i += 16) {
        const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax));
        _mm512_storeu_ps(x + i, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_maskz_extractf32x8_ps(0xFF, e, 1)));
    }
    if (i < n) {
        const __m512 e = _mm512_maskz_mov_ps(
            tail, exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), vmax)));
        _mm512_mask_storeu_ps(x + i, tail, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_maskz_extractf32x8_ps(0xFF, e, 1)));
    }
    alignas(64) double lanes[8];
    _mm512_store_pd(lanes, _mm512_add_pd(s0, s1));
    const double sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
                       ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    if (i < n) {
        _mm512_mask_storeu_ps(x + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), inv));
    }
}

template <int NC>
BlockAttentionKernels kernels_for() {
    return {&qk_block<NC>, &pv_block<NC>, &softmax_row};
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
