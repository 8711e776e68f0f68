// AVX-512 build of the blocked attention kernels (kernels/x86/attention_blocked.inc; see
// kernels/attention.h) for head sizes that are a multiple of 16 up to 256, with a vectorised
// softmax. Registered only where the CPU has AVX-512.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/avx512/tile512.h"
#include "kernels/isa_parts.h"
#include "kernels/x86/exp_poly.h"
#include "kernels/x86/hsum.h"
#include "kernels/x86/token_groups.h"

namespace specula::simd {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

struct V {
    using Reg = __m512;
    static constexpr int kLanes = 16;
    static constexpr int kAccRegs = 24;  // of the 32 zmm registers
    static constexpr int kRegs = 32;
    static SPECULA_INLINE Reg load(const float* p) { return _mm512_loadu_ps(p); }
    static SPECULA_INLINE Reg load(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static SPECULA_INLINE Reg load_i8(const uint8_t* p) {  // 16 int8 as floats
        return _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    }
    static SPECULA_INLINE void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
    static SPECULA_INLINE void store_lanes(float* p, Reg v, int lo, int hi) {
        _mm512_mask_storeu_ps(p, static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1)), v);
    }
    static SPECULA_INLINE Reg set1(float x) { return _mm512_set1_ps(x); }
    static SPECULA_INLINE Reg zero() { return _mm512_setzero_ps(); }
    static SPECULA_INLINE Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
    static SPECULA_INLINE Reg fnma(Reg a, Reg b, Reg c) { return _mm512_fnmadd_ps(a, b, c); }
    static SPECULA_INLINE Reg round(Reg a) {  // to the nearest integer, ties to even
        return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    static SPECULA_INLINE Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
    static SPECULA_INLINE Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
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

// e^x for x <= 0, 16 lanes (kernels/x86/exp_poly.h), times 2^n by vscalefps (which also flushes
// e^x below the float range to 0).
SPECULA_INLINE __m512 exp_nonpositive(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.f));
    const __m512 n = exp_exponent<V>(x);
    return _mm512_scalef_ps(exp_taylor7<V>(exp_reduce<V>(x, n)), n);
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

// Q8_0 keys against queries rounded to Q8_0 (BlockAttentionKernels::qk_q8), 16 rows at a time.
// The rows' int8 values are transposed so that lane r of a vector holds row r's 4 values at one
// offset: one vpdpbusd then adds a broadcast 4 query values times those 4 of all 16 rows, and a
// block of 32 takes 8 of them per query with no horizontal sum. vpdpbusd multiplies unsigned by
// signed bytes, so the rows are stored + 128 and each query block's sum times 128 is taken off
// (the integer dot stays exact).

// r[i] = dword i of the 16 rows r[0..16) (a 16 x 16 transpose of 32-bit values).
SPECULA_INLINE void transpose16x16(__m512i (&r)[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    // u[4i + c], 128-bit lane L: dword 4L + c of rows 4i .. 4i + 3.
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; ++c) {  // lane L of u[c], u[4 + c], u[8 + c], u[12 + c] -> r[4L + c]
        const __m512i a01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
        const __m512i a23 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
        const __m512i b01 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
        const __m512i b23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
        r[c] = _mm512_shuffle_i32x4(a01, b01, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(a01, b01, 0xDD);
        r[8 + c] = _mm512_shuffle_i32x4(a23, b23, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(a23, b23, 0xDD);
    }
}

// NB blocks of 32 per head (an odd count's last block is transposed beside zeros).
template <int NB>
void qk_q8_rows(const uint8_t* k, size_t ks, int /*hd*/, int j0, int j1, const KeyQueryQ8* const* q,
                int nq, float scale, float* const* s) {
    constexpr int kPairs = (NB + 1) / 2;
    __m512i kt[kPairs * 16];  // kt[8b + g]: values 4g .. 4g + 3 of block b of the 16 rows, + 128
    alignas(64) float dk[NB][16];
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512 vs = _mm512_set1_ps(scale);
    const __m512i rows_at = _mm512_mullo_epi32(  // byte offsets of rows 0..15
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(static_cast<int32_t>(ks)));
    for (int j = j0; j < j1; j += 16) {
        const int m = j1 - j < 16 ? j1 - j : 16;
        for (int r = 0; r < m; ++r) prefetch_row(k + (j + kRowsAhead + r) * ks, NB * kQ8Block);
        for (int p = 0; p < kPairs; ++p) {  // two blocks (16 dwords) of every row at a time
            __m512i rows[16];
            for (int r = 0; r < 16; ++r) {
                if (r < m) {
                    const uint8_t* b = k + (j + r) * ks + 2 * p * kQ8Block + 2;
                    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
                    const __m256i hi =
                        2 * p + 1 < NB
                            ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kQ8Block))
                            : _mm256_setzero_si256();
                    rows[r] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                } else {
                    rows[r] = _mm512_setzero_si512();
                }
            }
            transpose16x16(rows);
            for (int d = 0; d < 16; ++d) kt[16 * p + d] = _mm512_xor_si512(rows[d], flip);
        }
        // The 16 rows' scales of each block by one gather (a dword from each block's start, its
        // low half the F16 scale): writing them to a buffer one by one and loading it as a vector
        // stalled store forwarding on every block (30% of this kernel's time in a 1-token pass).
        const __mmask16 mask = static_cast<__mmask16>(m == 16 ? 0xFFFF : (1u << m) - 1);
        for (int b = 0; b < NB; ++b) {
            const __m512i dw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, rows_at,
                                                           k + j * ks + b * kQ8Block, 1);
            _mm512_store_ps(dk[b], _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw)));
        }
        for (int i = 0; i < nq; ++i) {
            const KeyQueryQ8* qi = q[i];
            __m512 acc = _mm512_setzero_ps();
            for (int b = 0; b < NB; ++b) {
                // The query's 4-byte groups broadcast from memory by vpdpbusd itself (through
                // GPRs they cost a load, a shift and a broadcast each: half of the loop's work).
                const int8_t* qd = qi[b].qs;
                __m512i a0 = _mm512_set1_epi32(-128 * qi[b].sum), a1 = _mm512_setzero_si512();
                for (int g = 0; g < 8; g += 2) {
                    a0 = dpbusd_bcast(a0, kt[8 * b + g], qd + 4 * g);
                    a1 = dpbusd_bcast(a1, kt[8 * b + g + 1], qd + 4 * g + 4);
                }
                const __m512 dkdq = _mm512_mul_ps(_mm512_load_ps(dk[b]), _mm512_set1_ps(qi[b].d));
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), dkdq, acc);
            }
            _mm512_mask_storeu_ps(s[i] + j, mask, _mm512_mul_ps(acc, vs));
        }
    }
}

bool block_attention_avx512(int head_dim, BlockAttentionKernels* k) {
    if (head_dim <= 0 || head_dim % 16 != 0) return false;
    if (!blocked_kernels<16>(head_dim / 16, k)) return false;
    set_qk_q8<8>(head_dim, k);  // the Q8_0 key dot for heads of 32 to 256 values
    return true;
}

}  // namespace

}  // namespace specula::simd

namespace specula::avx512 {

void add_attention(KernelTable& t) {
    t.attention(Isa::AVX512).blocked = &simd::block_attention_avx512;
}

}  // namespace specula::avx512
