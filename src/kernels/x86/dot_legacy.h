// The 32-element formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) against Q8_0 / Q8_1
// activations. Part of the x86 row-layout kernels (x86/dot_common.h says how they are built).
// ---- 32-element formats against Q8_0 / Q8_1 -----------------------------------------------------
// A row meets up to 5 tokens per pass (two accumulators each, even and odd blocks, which also
// hides the FMA latency for a single token; 5 x 2 plus the decoded block fit the 16 registers),
// and the groups are balanced (9 = 5 + 4). Per block and token the work is one sign, maddubs,
// maddwd, convert and FMA; the per-block scale products are formed for the whole group at once.
// The weights are prefetched 2 KiB ahead.
#pragma once

#include "kernels/x86/dot_common.h"

namespace specula::simd {
namespace {

// Calls f.template operator()<T>() for T = 0..NT-1 (compile-time token indices keep per-token
// arrays in registers).
template <int NT, class F>
SPECULA_INLINE void each_token(F&& f) {
    [&]<int... T>(std::integer_sequence<int, T...>) __attribute__((always_inline)) {
        (f.template operator()<T>(), ...);
    }
    (std::make_integer_sequence<int, NT>{});
}

// Token T's scale product in all 8 lanes: lo holds the products of tokens 0..3 in both 128-bit
// halves, hi those of tokens 4..7.
struct SplatScales {
    __m256 lo, hi;
    template <int T>
    SPECULA_INLINE __m256 get() const {
        return splat_token<T % 4>(T < 4 ? lo : hi);
    }
};

// dw as 8 floats (the fp16 broadcast, then converted: no scalar round trip).
SPECULA_INLINE __m256 dw8(fp16_t d) {
    return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(d)));
}

// The fp16 field `f` of block ib of each of the NT <= 8 tokens, converted, in lane t.
template <class A, int NT>
SPECULA_INLINE __m256 gather_halves(const TokenRows<A, NT>& y, int64_t ib, fp16_t A::*f) {
    static_assert(NT <= 8);
    uint64_t lo = 0, hi = 0;
    for (int t = 0; t < NT && t < 4; ++t) lo |= static_cast<uint64_t>(y.row[t][ib].*f) << (16 * t);
    for (int t = 4; t < NT; ++t) hi |= static_cast<uint64_t>(y.row[t][ib].*f) << (16 * (t - 4));
    return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo)));
}

// Lanes t of s as SplatScales.
SPECULA_INLINE SplatScales splat_scales(__m256 s) {
    return {_mm256_permute2f128_ps(s, s, 0x00), _mm256_permute2f128_ps(s, s, 0x11)};
}

// Where a group's activation scales come from. Either the Q8_0 blocks themselves (fp16, gathered
// and converted for each weight block: the VecDotFn entry) or a float array the caller converted
// once for all rows, ad[ib * stride + t] (the VecDotQ8Fn entry used by matmul; it saves the
// gather, about a fifth of the work of a multi-token dot). Both give the products dw * d_t of the
// same two floats, so the two entries agree bit for bit.
template <int NT>
struct ScalesF16 {
    TokenRows<block_q8_0, NT> y;
    float one(int64_t ib, float dw) const { return dw * h2f(y.row[0][ib].d); }
    SplatScales all(int64_t ib, __m256 dw) const {
        return splat_scales(_mm256_mul_ps(gather_halves(y, ib, &block_q8_0::d), dw));
    }
};
template <int NT>
struct ScalesF32 {
    const float* ad;  // readable up to ad[(nb - 1) * stride + 7]
    size_t stride;
    float one(int64_t ib, float dw) const { return dw * ad[ib * stride]; }
    SplatScales all(int64_t ib, __m256 dw) const {
        // vbroadcastf128 from memory is a plain load: the products come out already duplicated.
        const float* p = ad + ib * stride;
        const __m256 lo =
            _mm256_mul_ps(_mm256_broadcast_ps(reinterpret_cast<const __m128*>(p)), dw);
        if constexpr (NT <= 4) {
            return {lo, lo};
        } else {
            return {lo,
                    _mm256_mul_ps(_mm256_broadcast_ps(reinterpret_cast<const __m128*>(p + 4)), dw)};
        }
    }
};

// Signed weights (Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4): the decoder gives 32 signed bytes and the
// block's scale (Dec::dw, Dec::dw8: one float, and in 8 lanes); the sign trick
// moves the weight's sign onto the activation so maddubs can take |w| as its unsigned operand.
// That needs activations in [-127, 127] (-128 would not negate), which is what the Q8_0 and Q8_K
// quantizers produce; weights may hold -128 (|-128| reads as the unsigned 128).
template <class Dec>
struct SignedLegacy {
    using W = typename Dec::Block;

    template <int NT, class S>
    static void dot(int64_t n, const W* w, const TokenRows<block_q8_0, NT>& y, const S& sc,
                    float* out) {
        const int64_t nb = n / 32;
        // acc[0] takes the even blocks, acc[1] the odd ones. Every index below is a compile-time
        // constant, so the accumulators live in registers.
        __m256 acc[2][NT];
        each_token<NT>([&]<int T>() { acc[0][T] = acc[1][T] = _mm256_setzero_ps(); });
        auto step = [&]<int P>(int64_t ib) __attribute__((always_inline)) {
            const __m256i q = Dec::decode(w[ib]);
            const __m256i uq = _mm256_sign_epi8(q, q);
            if constexpr (NT == 1) {
                const float dw = Dec::dw(w[ib]);
                const __m256i p = dot_us(uq, _mm256_sign_epi8(load256(y.row[0][ib].qs), q));
                acc[P][0] = _mm256_fmadd_ps(_mm256_set1_ps(sc.one(ib, dw)), _mm256_cvtepi32_ps(p),
                                            acc[P][0]);
            } else {
                const SplatScales s = sc.all(ib, Dec::dw8(w[ib]));
                each_token<NT>([&]<int T>() __attribute__((always_inline)) {
                    const __m256i p = dot_us(uq, _mm256_sign_epi8(load256(y.row[T][ib].qs), q));
                    acc[P][T] =
                        _mm256_fmadd_ps(s.template get<T>(), _mm256_cvtepi32_ps(p), acc[P][T]);
                });
            }
        };
        int64_t ib = 0;
        for (; ib + 2 <= nb; ib += 2) {
            prefetch_ahead(w + ib);
            step.template operator()<0>(ib);
            step.template operator()<1>(ib + 1);
        }
        if (ib < nb) step.template operator()<0>(ib);
        each_token<NT>([&]<int T>() { out[T] = hsum8(_mm256_add_ps(acc[0][T], acc[1][T])); });
    }

    template <int NT>
    static void run(int64_t n, const void* w, const uint8_t* a, size_t stride, float* out) {
        const TokenRows<block_q8_0, NT> y(a, stride);
        dot<NT>(n, static_cast<const W*>(w), y, ScalesF16<NT>{y}, out);
    }
    template <int NT>
    static void run_f32(int64_t n, const void* w, const uint8_t* a, size_t stride, const float* ad,
                        size_t ad_stride, float* out) {
        dot<NT>(n, static_cast<const W*>(w), TokenRows<block_q8_0, NT>(a, stride),
                ScalesF32<NT>{ad, ad_stride}, out);
    }
};

constexpr int kLegacyGroupMax = 5;  // two accumulators per token must fit the 16 registers

// VecDotQ8Fn entry: the tokens' scales come as floats, ad[ib * ad_stride + t].
template <class K>
void vec_dot_legacy_f32(int64_t n, const void* w, const void* a, size_t stride, const float* ad,
                        size_t ad_stride, int ntok, float* out) {
    const auto* ab = static_cast<const uint8_t*>(a);
    balanced_groups<kLegacyGroupMax>(ntok, [&](auto nt, int t) {
        K::template run_f32<nt()>(n, w, ab + t * stride, stride, ad + t, ad_stride, out + t);
    });
}

// The fp16 scale d of the Q8_0 / Q4_0 / Q5_0 / IQ4_NL blocks.
template <class B>
struct Fp16Scale {
    static SPECULA_INLINE float dw(const B& b) { return h2f(b.d); }
    static SPECULA_INLINE __m256 dw8(const B& b) { return simd::dw8(b.d); }
};

struct DecQ8_0 : Fp16Scale<block_q8_0> {
    using Block = block_q8_0;
    static SPECULA_INLINE __m256i decode(const Block& b) { return load256(b.qs); }
};
struct DecQ4_0 : Fp16Scale<block_q4_0> {
    using Block = block_q4_0;
    static SPECULA_INLINE __m256i decode(const Block& b) {
        return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8));
    }
};
struct DecQ5_0 : Fp16Scale<block_q5_0> {
    using Block = block_q5_0;
    static SPECULA_INLINE __m256i decode(const Block& b) {
        uint32_t qh;
        std::memcpy(&qh, b.qh, 4);
        const __m256i hi = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), hi), _mm256_set1_epi8(16));
    }
};
struct DecIQ4_NL : Fp16Scale<block_iq4_nl> {
    using Block = block_iq4_nl;
    static SPECULA_INLINE __m256i decode(const Block& b) {
        const __m256i table = _mm256_broadcastsi128_si256(load128(kvalues_iq4nl));
        return _mm256_shuffle_epi8(table, nibbles32(b.qs));
    }
};
// MXFP4: the doubled E2M1 levels through the same shuffle, and the E8M0 exponent's 2^(e - 128)
// built as float bits (exact, as the scalar reference's).
struct DecMXFP4 {
    using Block = block_mxfp4;
    static SPECULA_INLINE __m256i decode(const Block& b) {
        const __m256i table = _mm256_broadcastsi128_si256(load128(kvalues_mxfp4));
        return _mm256_shuffle_epi8(table, nibbles32(b.qs));
    }
    static SPECULA_INLINE float dw(const Block& b) {
        const uint32_t bits = b.e >= 2 ? static_cast<uint32_t>(b.e - 1) << 23
                                       : (b.e == 0 ? 0x00200000u : 0x00400000u);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }
    static SPECULA_INLINE __m256 dw8(const Block& b) { return _mm256_set1_ps(dw(b)); }
};

// Unsigned weights with a min (Q4_1, Q5_1) against Q8_1: d_w d_a sum(q a) + m_w s_a.
template <class Dec>
struct MinLegacy {
    using W = typename Dec::Block;
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        const W* w = static_cast<const W*>(wv);
        const TokenRows<block_q8_1, NT> y(a, stride);
        const int64_t nb = n / 32;
        __m256 acc[2][NT];
        __m256 mins = _mm256_setzero_ps();  // lane t: token t's sum of m_w s_a
        each_token<NT>([&]<int T>() { acc[0][T] = acc[1][T] = _mm256_setzero_ps(); });
        auto step = [&]<int P>(int64_t ib) __attribute__((always_inline)) {
            const __m256i q = Dec::decode(w[ib]);
            if constexpr (NT == 1) {
                const block_q8_1& yb = y.row[0][ib];
                const float dw = h2f(w[ib].d), mw = h2f(w[ib].m);
                const __m256i p = dot_us(q, load256(yb.qs));
                acc[P][0] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(yb.d)), _mm256_cvtepi32_ps(p),
                                            acc[P][0]);
                mins = _mm256_castps128_ps256(_mm_fmadd_ss(_mm_set_ss(mw), _mm_set_ss(h2f(yb.s)),
                                                           _mm256_castps256_ps128(mins)));
            } else {
                // The same products and FMAs as the one-token path, all tokens' in one register.
                const SplatScales s =
                    splat_scales(_mm256_mul_ps(gather_halves(y, ib, &block_q8_1::d), dw8(w[ib].d)));
                mins = _mm256_fmadd_ps(dw8(w[ib].m), gather_halves(y, ib, &block_q8_1::s), mins);
                each_token<NT>([&]<int T>() __attribute__((always_inline)) {
                    const __m256i p = dot_us(q, load256(y.row[T][ib].qs));
                    acc[P][T] =
                        _mm256_fmadd_ps(s.template get<T>(), _mm256_cvtepi32_ps(p), acc[P][T]);
                });
            }
        };
        int64_t ib = 0;
        for (; ib + 2 <= nb; ib += 2) {
            prefetch_ahead(w + ib);
            step.template operator()<0>(ib);
            step.template operator()<1>(ib + 1);
        }
        if (ib < nb) step.template operator()<0>(ib);
        alignas(32) float m[8];
        _mm256_store_ps(m, mins);
        each_token<NT>(
            [&]<int T>() { out[T] = hsum8(_mm256_add_ps(acc[0][T], acc[1][T])) + m[T]; });
    }
};

struct DecQ4_1 {
    using Block = block_q4_1;
    static SPECULA_INLINE __m256i decode(const Block& b) { return nibbles32(b.qs); }
};
struct DecQ5_1 {
    using Block = block_q5_1;
    static SPECULA_INLINE __m256i decode(const Block& b) {
        uint32_t qh;
        std::memcpy(&qh, b.qh, 4);
        const __m256i hi = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(nibbles32(b.qs), hi);
    }
};

}  // namespace
}  // namespace specula::simd
