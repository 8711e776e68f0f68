// AVX2/FMA versions of the two inner loops of attention and of the KV cache's row conversions,
// and the AVX2 build of the blocked kernels (kernels/x86/attention_blocked.inc, with AVX-512's
// softmax in 8 lanes) for head sizes that are a multiple of 8 up to 256, with an integer Q8_0 key
// dot of AVX-512's bits. Fixed summation order, so results are the same for any batch.
#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/isa_parts.h"
#include "kernels/x86/exp_poly.h"
#include "kernels/x86/hsum.h"
#include "kernels/x86/token_groups.h"

namespace specula::simd {

namespace {

float dot_f32_avx2(const float* x, const float* y, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
    }
    const __m256 acc = _mm256_add_ps(acc0, acc1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    float r = _mm_cvtss_f32(s);
    for (; i < n; ++i) r += x[i] * y[i];
    return r;
}

void axpy_avx2(float a, const float* x, float* y, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    }
    for (; i < n; ++i) y[i] += a * x[i];
}

struct V {
    using Reg = __m256;
    static constexpr int kLanes = 8;
    static constexpr int kAccRegs = 12;  // of the 16 ymm registers
    static constexpr int kRegs = 16;
    static __attribute__((always_inline)) Reg load(const float* p) { return _mm256_loadu_ps(p); }
    static __attribute__((always_inline)) Reg load(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static __attribute__((always_inline)) Reg load_i8(const uint8_t* p) {  // 8 int8 as floats
        return _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    }
    static __attribute__((always_inline)) void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
    static __attribute__((always_inline)) void store_lanes(float* p, Reg v, int lo, int hi) {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), lane),
                                               _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane));
        _mm256_maskstore_ps(p, in, v);
    }
    static __attribute__((always_inline)) Reg set1(float x) { return _mm256_set1_ps(x); }
    static __attribute__((always_inline)) Reg zero() { return _mm256_setzero_ps(); }
    static __attribute__((always_inline)) Reg fma(Reg a, Reg b, Reg c) {
        return _mm256_fmadd_ps(a, b, c);
    }
    static __attribute__((always_inline)) Reg fnma(Reg a, Reg b, Reg c) {
        return _mm256_fnmadd_ps(a, b, c);
    }
    static __attribute__((always_inline)) Reg round(Reg a) {  // to nearest, ties to even
        return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    static __attribute__((always_inline)) Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
    static __attribute__((always_inline)) Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
    static __attribute__((always_inline)) float hsum(Reg v) { return hsum8(v); }
    static constexpr bool kHsumRows = false;  // no many-row reduction: qk_block reduces each row
    static Reg hsum_rows(const Reg (&)[16]) { return zero(); }
};

// e^x for x <= 0, 8 lanes (kernels/x86/exp_poly.h), with AVX-512's bits. AVX2 has no vscalefps:
// 2^n (n in [-150, 0]) is applied as two exact powers of two, 2^floor(n / 2) first (the product
// stays a normal float, so it is exact), then the rest, which rounds once, as vscalefps does, also
// where the result is subnormal.
__attribute__((always_inline)) inline __m256 exp_nonpositive(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-104.f));
    const __m256 n = exp_exponent<V>(x);
    const __m256 p = exp_taylor7<V>(exp_reduce<V>(x, n));
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    auto pow2 = [](__m256i e) {
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
    };
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2(n1)), pow2(n2));
}

// x[0..n) = softmax(x), AVX-512's softmax_row in 8 lanes with its bits: the maximum, e^(x - max),
// their sum in double precision 16 columns at a time (columns 0-7 of each 16 into one set of 8
// double lanes, 8-15 into another, here four 4-lane registers), the same final tree, and the
// products with 1 / sum.
void softmax_row(float* x, int n) {
    __m256 mx = _mm256_set1_ps(-__builtin_inff());
    int i = 0;
    for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float m = std::max(_mm_cvtss_f32(m4), _mm_cvtss_f32(_mm_movehdup_ps(m4)));
    for (; i < n; ++i) m = std::max(m, x[i]);
    const __m256 vmax = _mm256_set1_ps(m);
    __m256d s[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
    auto add = [&](__m256 e0, __m256 e1) {  // columns 0-7 and 8-15 of a group of 16
        s[0] = _mm256_add_pd(s[0], _mm256_cvtps_pd(_mm256_castps256_ps128(e0)));
        s[1] = _mm256_add_pd(s[1], _mm256_cvtps_pd(_mm256_extractf128_ps(e0, 1)));
        s[2] = _mm256_add_pd(s[2], _mm256_cvtps_pd(_mm256_castps256_ps128(e1)));
        s[3] = _mm256_add_pd(s[3], _mm256_cvtps_pd(_mm256_extractf128_ps(e1, 1)));
    };
    for (i = 0; i + 16 <= n; i += 16) {
        const __m256 e0 = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
        const __m256 e1 = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmax));
        _mm256_storeu_ps(x + i, e0);
        _mm256_storeu_ps(x + i + 8, e1);
        add(e0, e1);
    }
    if (i < n) {  // the last 1-15 columns, the group's other lanes adding zeros
        alignas(32) float t[16] = {};
        std::memcpy(t, x + i, sizeof(float) * size_t(n - i));
        for (int h = 0; h < 16; h += 8) {
            const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_load_ps(t + h), vmax));
            _mm256_store_ps(t + h, e);
        }
        for (int c = n - i; c < 16; ++c) t[c] = 0.f;
        std::memcpy(x + i, t, sizeof(float) * size_t(n - i));
        add(_mm256_load_ps(t), _mm256_load_ps(t + 8));
    }
    alignas(32) double lanes[8];
    _mm256_store_pd(lanes, _mm256_add_pd(s[0], s[2]));
    _mm256_store_pd(lanes + 4, _mm256_add_pd(s[1], s[3]));
    const double sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
                       ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; ++i) x[i] *= _mm256_cvtss_f32(inv);
}

#include "kernels/x86/attention_blocked.inc"

// Q8_0 keys against queries rounded to Q8_0 (BlockAttentionKernels::qk_q8), 8 rows at a time,
// with AVX2's byte products (no VNNI). The rows' blocks are transposed so that lane r of a vector
// holds row r's 4 values at one offset; per query, each group of 4 query values is broadcast,
// vpsignb gives it the sign of each row's values and vpmaddubsw multiplies it by their magnitudes,
// vpmaddwd adds the pairs: lane r gets row r's exact dot over those 4 values, and a block of 32
// takes 8 of them with no horizontal sum. Exact for keys in [-128, 127] and query values in
// [-127, 127] (Q8_0's rounding gives no -128): a magnitude is at most 128, a pair's sum at most
// 32512, within int16.

// r[d] = dword d of the 8 rows r[0..8) (an 8 x 8 transpose of 32-bit values).
SPECULA_INLINE void transpose8x8(__m256i (&r)[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    // u[4h + c], 128-bit lane L: dword 4L + c of rows 4h .. 4h + 3.
    for (int h = 0; h < 8; h += 4) {
        u[h] = _mm256_unpacklo_epi64(t[h], t[h + 2]);
        u[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);
        u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
        u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
    }
    for (int c = 0; c < 4; ++c) {
        r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
    }
}

// NB blocks of 32 per head.
template <int NB>
void qk_q8_rows(const uint8_t* k, size_t ks, int /*hd*/, int j0, int j1, const KeyQueryQ8* const* q,
                int nq, float scale, float* const* s) {
    // kt[8b + g]: values 4g .. 4g + 3 of block b of the 8 rows; ka: their magnitudes.
    __m256i kt[NB * 8], ka[NB * 8];
    __m256 dk[NB];
    const __m256i ones = _mm256_set1_epi16(1), lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i rows_at = _mm256_mullo_epi32(lanes, _mm256_set1_epi32(static_cast<int32_t>(ks)));
    const __m256 vs = _mm256_set1_ps(scale);
    for (int j = j0; j < j1; j += 8) {
        const int m = j1 - j < 8 ? j1 - j : 8;
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), lanes);
        for (int r = 0; r < m; ++r) prefetch_row(k + (j + kRowsAhead + r) * ks, NB * kQ8Block);
        for (int b = 0; b < NB; ++b) {
            __m256i rows[8];
            for (int r = 0; r < 8; ++r) {
                rows[r] = r < m ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                      k + (j + r) * ks + b * kQ8Block + 2))
                                : _mm256_setzero_si256();
            }
            transpose8x8(rows);
            for (int g = 0; g < 8; ++g) {
                kt[8 * b + g] = rows[g];
                ka[8 * b + g] = _mm256_abs_epi8(rows[g]);
            }
            // The 8 rows' F16 scales by one masked gather (a dword from the block's start, its
            // low half the scale), their low halves packed into 8 halves and widened.
            const __m256i dw = _mm256_mask_i32gather_epi32(
                _mm256_setzero_si256(), reinterpret_cast<const int*>(k + j * ks + b * kQ8Block),
                rows_at, mask, 1);
            const __m256i lo = _mm256_packus_epi32(_mm256_and_si256(dw, _mm256_set1_epi32(0xFFFF)),
                                                   _mm256_setzero_si256());
            dk[b] = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(lo, 0x08)));
        }
        for (int i = 0; i < nq; ++i) {
            const KeyQueryQ8* qi = q[i];
            __m256 acc = _mm256_setzero_ps();
            for (int b = 0; b < NB; ++b) {
                const int8_t* qd = qi[b].qs;
                __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
                for (int g = 0; g < 8; g += 2) {
                    int32_t w0, w1;
                    std::memcpy(&w0, qd + 4 * g, 4);
                    std::memcpy(&w1, qd + 4 * g + 4, 4);
                    const __m256i p0 = _mm256_maddubs_epi16(
                        ka[8 * b + g], _mm256_sign_epi8(_mm256_set1_epi32(w0), kt[8 * b + g]));
                    const __m256i p1 = _mm256_maddubs_epi16(
                        ka[8 * b + g + 1],
                        _mm256_sign_epi8(_mm256_set1_epi32(w1), kt[8 * b + g + 1]));
                    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(p0, ones));
                    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(p1, ones));
                }
                const __m256 dkdq = _mm256_mul_ps(dk[b], _mm256_set1_ps(qi[b].d));
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a0, a1)), dkdq, acc);
            }
            _mm256_maskstore_ps(s[i] + j, mask, _mm256_mul_ps(acc, vs));
        }
    }
}

bool block_attention_avx2(int head_dim, BlockAttentionKernels* k) {
    if (head_dim <= 0 || head_dim % 8 != 0) return false;
    if (!blocked_kernels<32>(head_dim / 8, k)) return false;
    set_qk_q8<8>(head_dim, k);  // the Q8_0 key dot for heads of 32 to 256 values
    return true;
}

void fp16_to_f32_avx2(const uint16_t* x, float* out, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i,
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
    for (; i < n; ++i) out[i] = _cvtsh_ss(x[i]);
}

void i8_scale_to_f32_avx2(const int8_t* q, float d, float* out, int n) {
    const __m256 vd = _mm256_set1_ps(d);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b))));
    }
    for (; i < n; ++i) out[i] = d * static_cast<float>(q[i]);
}

}  // namespace

}  // namespace specula::simd

namespace specula::avx2 {

void add_attention(KernelTable& t) {
    AttentionEntry& e = t.attention(Isa::AVX2);
    e.dot = &simd::dot_f32_avx2;
    e.axpy = &simd::axpy_avx2;
    e.blocked = &simd::block_attention_avx2;
    e.fp16_to_f32 = &simd::fp16_to_f32_avx2;
    e.i8_scale_to_f32 = &simd::i8_scale_to_f32_avx2;
}

}  // namespace specula::avx2
