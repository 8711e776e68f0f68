// AVX2 activation quantizers: float rows to Q8_0, Q8_1, Q8_K, F16 and BF16, bit-identical to
// quantize_row_ggml_cpu (kernels/quants.h), which matmul would otherwise call once per token and
// weight. Same rules as the reference: Q8_0/Q8_1 use id = 127 / amax with ties to even; Q8_K takes
// the first element of largest magnitude (with its sign) as max, iscale = -127 / max,
// q = min(127, round_even(iscale * x)), d = 1 / iscale; fp16 and bf16 round to nearest even.
//
// Compiled with -mavx2 -mfma -mf16c; like the dot kernels it calls no inline function of a shared
// header, so no AVX2 copy of one can leak to scalar callers.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/isa_parts.h"
#include "kernels/layout/blocks.h"

namespace specula::simd {

namespace {

// Largest |x| of 8 floats per vector, reduced to one float (max is exact, so order is free).
float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

__m256 abs_ps(__m256 v) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

// 32 int32 in four vectors to 32 int8 in element order (values already within int8).
__m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b);  // lanes interleave: a0 b0 | a1 b1
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packs_epi16(ab, cd);  // a0 b0 c0 d0 | a1 b1 c1 d1 (4-byte groups)
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The reference's rounding, element by element: used when the scale is not finite (a block of
// subnormal values), where the vector conversion would give INT_MIN instead of lrint's result.
int round_scalar(float v) {
    return static_cast<int>(std::lrintf(v));
}

bool finite(float f) {
    return std::fabs(f) <= 3.4028235e38f;
}

// One 32-element block with scale id: q = round_even(x * id). Returns the int8 vector.
__m256i round_block32(const float* x, float id_scalar) {
    if (!finite(id_scalar)) {
        alignas(32) int8_t q[32];
        for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(round_scalar(x[j] * id_scalar));
        return _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
    }
    const __m256 id = _mm256_set1_ps(id_scalar);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
        q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), id));
    }
    return pack32(q[0], q[1], q[2], q[3]);
}

float amax32(const float* x) {
    __m256 m = abs_ps(_mm256_loadu_ps(x));
    for (int k = 1; k < 4; ++k) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 8 * k)));
    return hmax(m);
}

// Sum of the 32 int8 in v.
int hsum_i8(__m256i v) {
    const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), v);
    const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

fp16_t to_fp16(float f) {
    return static_cast<fp16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

void quantize_q8_0(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<block_q8_0*>(dst);
    for (int64_t i = 0; i < n / QK8_0; ++i, x += QK8_0) {
        const float amax = amax32(x);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), round_block32(x, id));
        y[i].d = to_fp16(d);
    }
}

void quantize_q8_1(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<block_q8_1*>(dst);
    for (int64_t i = 0; i < n / QK8_1; ++i, x += QK8_1) {
        const float amax = amax32(x);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const __m256i q = round_block32(x, id);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), q);
        y[i].d = to_fp16(d);
        y[i].s = to_fp16(static_cast<float>(hsum_i8(q)) * d);
    }
}

// The first of a Q8_K block's 256 elements whose magnitude is amax, with its sign: 8 compared at
// a time (one at a time with a branch each, the amax and this search took 27 us for 9 rows of
// 4096 values, 7.3 us this way, on an Intel Xeon: a 9-token pass of an 8B-shaped model quantizes
// ~8M).
float first_of_magnitude(const float* x, float amax) {
    const __m256 a = _mm256_set1_ps(amax);
    for (int k = 0; k < QK_K; k += 8) {
        const int eq =
            _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + k)), a, _CMP_EQ_OQ));
        if (eq) return x[k + __builtin_ctz(static_cast<unsigned>(eq))];
    }
    return 0.0f;  // not reached: amax is the largest of these magnitudes
}

void quantize_q8_K(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<block_q8_K*>(dst);
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < QK_K; k += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + k)));
        const float amax = hmax(m);
        if (amax == 0.0f) {
            std::memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const float max = first_of_magnitude(x, amax);
        const float iscale = -127.0f / max;
        if (!finite(iscale)) {  // subnormal block: the reference's scalar rounding
            for (int l = 0; l < QK_K; ++l) {
                const int q = round_scalar(iscale * x[l]);
                y[i].qs[l] = static_cast<int8_t>(q < 127 ? q : 127);
            }
            for (int g = 0; g < QK_K / 16; ++g) {
                int sum = 0;
                for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
                y[i].bsums[g] = static_cast<int16_t>(sum);
            }
            y[i].d = 1.0f / iscale;
            continue;
        }
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i cap = _mm256_set1_epi32(127);
        for (int b = 0; b < QK_K; b += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; ++k) {
                const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + b + 8 * k), is);
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(v), cap);
            }
            const __m256i q8 = pack32(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + b), q8);
            // bsums of the two 16-element groups of this 32-element chunk.
            const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q8);
            const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));  // 4 per lane
            __m128i lo = _mm256_castsi256_si128(s32), hi = _mm256_extracti128_si256(s32, 1);
            lo = _mm_hadd_epi32(lo, lo);
            hi = _mm_hadd_epi32(hi, hi);
            lo = _mm_hadd_epi32(lo, lo);
            hi = _mm_hadd_epi32(hi, hi);
            y[i].bsums[b / 16] = static_cast<int16_t>(_mm_cvtsi128_si32(lo));
            y[i].bsums[b / 16 + 1] = static_cast<int16_t>(_mm_cvtsi128_si32(hi));
        }
        y[i].d = 1.0f / iscale;
    }
}

void quantize_f16(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<fp16_t*>(dst);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
    }
    for (; i < n; ++i) y[i] = to_fp16(x[i]);
}

bf16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((u >> 16) | 64);  // quiet NaN
    return static_cast<bf16_t>((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

void quantize_bf16(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<bf16_t*>(dst);
    int64_t i = 0;
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        const __m256i rounded =
            _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, odd)), 16);
        const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
        const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
        // 8 uint32 (< 65536) to 8 uint16.
        const __m128i packed =
            _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), packed);
    }
    for (; i < n; ++i) y[i] = to_bf16(x[i]);
}

void quantize_f32(const float* x, void* dst, int64_t n) {
    std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

}  // namespace specula::simd

namespace specula::avx2 {

void add_quantize(KernelTable& t) {
    t.quantizer(GGMLType::Q8_0, Isa::AVX2) = &simd::quantize_q8_0;
    t.quantizer(GGMLType::Q8_1, Isa::AVX2) = &simd::quantize_q8_1;
    t.quantizer(GGMLType::Q8_K, Isa::AVX2) = &simd::quantize_q8_K;
    t.quantizer(GGMLType::F16, Isa::AVX2) = &simd::quantize_f16;
    t.quantizer(GGMLType::BF16, Isa::AVX2) = &simd::quantize_bf16;
    t.quantizer(GGMLType::F32, Isa::AVX2) = &simd::quantize_f32;
}

}  // namespace specula::avx2
