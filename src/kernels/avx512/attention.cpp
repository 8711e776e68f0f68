// AVX-512 build of the blocked attention kernels (kernels/x86/attention_blocked.inc; see
// kernels/attention.h) for head sizes that are a multiple of 16 up to 256, with a vectorised
// softmax. Registered only where the CPU has AVX-512.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/attention.h"

#include <immintrin.h>

#include <type_traits>

#include "kernels/isa_parts.h"
#include "kernels/x86/hsum.h"
#include "kernels/x86/token_groups.h"

namespace specula::simd {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

struct V {
    using Reg = __m512;
    static constexpr int kLanes = 16;
    static constexpr int kAccRegs = 24;  // of the 32 zmm registers
    static SPECULA_INLINE Reg load(const float* p) { return _mm512_loadu_ps(p); }
    static SPECULA_INLINE Reg load(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static SPECULA_INLINE void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
    static SPECULA_INLINE Reg set1(float x) { return _mm512_set1_ps(x); }
    static SPECULA_INLINE Reg zero() { return _mm512_setzero_ps(); }
    static SPECULA_INLINE Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
    static SPECULA_INLINE Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
    static SPECULA_INLINE float hsum(Reg v) { return hsum16(v); }
    // Lane r = hsum(x[r]) bit for bit, for 16 vectors at once: hsum16's tree (lane i + lane i + 8,
    // then + 4, + 2, + 1) run on pairs of vectors brought together by shuffles, 45 operations in
    // all rather than 16 reductions of 7. Slot 4e + L takes row 4L + e, which the shuffles bring
    // out in row order.
    static constexpr bool kHsumRows = true;
    static SPECULA_INLINE Reg hsum_rows(const Reg (&x)[16]) {
        auto in = [&](int s) { return x[(s % 4) * 4 + s / 4]; };
        Reg y[8], z[4], w[2];
        for (int k = 0; k < 8; ++k) {  // lanes 0-7: slot 2k's i + (i + 8), lanes 8-15: slot 2k+1's
            const Reg a = in(2 * k), b = in(2 * k + 1);
            y[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
        }
        for (int m = 0; m < 4; ++m) {  // 128-bit lane c: slot 4m + c's i + (i + 4)
            const Reg a = y[2 * m], b = y[2 * m + 1];
            z[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
        }
        for (int n = 0; n < 2; ++n) {  // lane c: slots 8n + c and 8n + 4 + c's i + (i + 2)
            const Reg a = z[2 * n], b = z[2 * n + 1];
            w[n] = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
        }
        // lane c: slots c, 4 + c, 8 + c, 12 + c, their two halves added
        return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
};

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

#include "kernels/x86/attention_blocked.inc"

bool block_attention_avx512(int head_dim, BlockAttentionKernels* k) {
    if (head_dim <= 0 || head_dim % 16 != 0) return false;
    return blocked_kernels<16>(head_dim / 16, k);
}

}  // namespace

}  // namespace specula::simd

namespace specula::avx512 {

void add_attention(KernelTable& t) {
    t.attention(Isa::AVX512).blocked = &simd::block_attention_avx512;
}

}  // namespace specula::avx512
