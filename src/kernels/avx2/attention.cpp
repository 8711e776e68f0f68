// AVX2/FMA versions of the two inner loops of attention and of the KV cache's row conversions,
// and the AVX2 build of the blocked kernels (kernels/x86/attention_blocked.inc; no softmax of its
// own: the caller's scalar one) for head sizes that are a multiple of 8 up to 256. Fixed summation
// order, so results are the same for any batch.
#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/isa_parts.h"
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
    static __attribute__((always_inline)) Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
    static __attribute__((always_inline)) Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
    static __attribute__((always_inline)) float hsum(Reg v) { return hsum8(v); }
    static constexpr bool kHsumRows = false;  // no many-row reduction: qk_block reduces each row
    static Reg hsum_rows(const Reg (&)[16]) { return zero(); }
};

// No softmax kernel at this level: BlockAttentionKernels::softmax stays null (the caller's).
constexpr std::nullptr_t softmax_row = nullptr;

#include "kernels/x86/attention_blocked.inc"

bool block_attention_avx2(int head_dim, BlockAttentionKernels* k) {
    if (head_dim <= 0 || head_dim % 8 != 0) return false;
    return blocked_kernels<32>(head_dim / 8, k);
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
