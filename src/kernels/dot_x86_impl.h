// The x86 dot-product kernels, written once with AVX2 intrinsics and compiled twice: by
// dot_avx2.cpp (-mavx2 -mfma -mf16c) and by dot_avx512.cpp (adds AVX-512 F/BW/VL/DQ/VNNI/BF16).
// Include it from those two files only. Everything here has internal linkage, so the two copies
// never meet at link time, and it calls no inline function of a shared header (the linker could
// otherwise pick the copy compiled with wider instructions for a scalar caller); fp16 scales are
// converted with the F16C intrinsic instead of kernels/fp16.h.
//
// One weight row meets up to 4 tokens at a time: every weight block is decoded once and folded
// into each token's own accumulators. A token's accumulators see the same operations in the same
// order whatever the group size, so out[t] is bit-identical for any ntok (batch invariance).
// Integer parts are exact; only the float accumulation order differs from the scalar reference.
// Groups of 2+ tokens take cheaper routes to the same values: the signed 32-element formats convert
// the tokens' fp16 scales in one register, and Q4_K / Q5_K / Q6_K decode one piece of a super-block
// at a time into every token's int32 sum (keeping the decoded weights in registers).
//
// With AVX512-VNNI the only change is that byte dot products use vpdpbusd (256-bit, EVEX) instead
// of vpmaddubsw + vpmaddwd; both give the same int32 lanes, so the two builds agree bit for bit
// (and the compiler gets 32 vector registers).
#pragma once

#include <immintrin.h>

#include <cstring>
#include <utility>

#include "kernels/blocks.h"
#include "kernels/dispatch.h"

namespace specula::simd {
namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

constexpr int kGroup = 4;  // tokens per pass over a weight row

SPECULA_INLINE float h2f(fp16_t h) {
    return _cvtsh_ss(h);
}

SPECULA_INLINE __m256i load256(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
SPECULA_INLINE __m128i load128(const void* p) {
    return _mm_loadu_si128(static_cast<const __m128i*>(p));
}

// Fixed-order horizontal sum of 8 floats.
SPECULA_INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Pairwise products of unsigned u (0..255) and signed s bytes, summed in fours: 8 x int32.
// Needs |u * s| pairs to fit int16: u <= 128 with s in [-127, 127], or u < 128.
SPECULA_INLINE __m256i dot_us(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
// Same, each pair sum of 2 bytes multiplied by an int16 scale first.
SPECULA_INLINE __m256i dot_us_scaled(__m256i u, __m256i s, __m256i scale16) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16);
}

// The 32 nibbles of 16 bytes: low nibbles in bytes 0..15, high nibbles in bytes 16..31 (the
// element order of the 32-element formats).
SPECULA_INLINE __m256i nibbles32(const uint8_t* qs) {
    const __m128i q = load128(qs);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Byte j = 0xFF where bit j of the 32-bit word is set (Q5_0 / Q5_1 fifth bits).
SPECULA_INLINE __m256i bits_to_bytes(uint32_t bits) {
    const __m256i v = _mm256_set1_epi32(static_cast<int>(bits));
    const __m256i spread = _mm256_shuffle_epi8(
        v, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// Per-token activation block pointers for a group of NT tokens.
template <class A, int NT>
struct TokenRows {
    const A* row[NT];
    TokenRows(const uint8_t* a, size_t stride) {
        for (int t = 0; t < NT; ++t) row[t] = reinterpret_cast<const A*>(a + t * stride);
    }
};

// The products dw * d for token t's block ib, up to 4 tokens at once, both 128-bit lanes holding
// [t0, t1, t2, t3]: the fp16 scales are packed in one register and converted and multiplied
// together. Each product is the same IEEE multiply of the same two floats as the one-token path's
// dw * h2f(d), so results stay bit-identical.
template <class A, int NT>
SPECULA_INLINE __m256 token_scales(const TokenRows<A, NT>& y, int64_t ib, float dw) {
    static_assert(NT <= 4);
    uint64_t bits = 0;
    for (int t = 0; t < NT; ++t) bits |= static_cast<uint64_t>(y.row[t][ib].d) << (16 * t);
    const __m128 d = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(bits)));
    const __m128 s = _mm_mul_ps(d, _mm_set1_ps(dw));
    return _mm256_set_m128(s, s);
}

// Token t's lane of token_scales in all 8 lanes.
template <int T>
SPECULA_INLINE __m256 splat_token(__m256 s) {
    return _mm256_permute_ps(s, T * 0x55);
}

// Splits ntok tokens into groups of kGroup (then 3, 2, 1) and runs K::run<NT> on each.
template <class K>
void vec_dot_tokens(int64_t n, const void* w, const void* a, size_t stride, int ntok, float* out) {
    const auto* ab = static_cast<const uint8_t*>(a);
    int t = 0;
    for (; t + kGroup <= ntok; t += kGroup)
        K::template run<kGroup>(n, w, ab + t * stride, stride, out + t);
    switch (ntok - t) {
        case 3:
            K::template run<3>(n, w, ab + t * stride, stride, out + t);
            break;
        case 2:
            K::template run<2>(n, w, ab + t * stride, stride, out + t);
            break;
        case 1:
            K::template run<1>(n, w, ab + t * stride, stride, out + t);
            break;
        default:
            break;
    }
}

// ---- 32-element formats against Q8_0 / Q8_1 -----------------------------------------------------
// Two accumulators per token (even and odd blocks) hide the FMA latency for a single token.

// Signed weights (Q8_0, Q4_0, Q5_0, IQ4_NL): the decoder gives 32 signed bytes; the sign trick
// moves the weight's sign onto the activation so maddubs can take |w| as its unsigned operand.
// That needs activations in [-127, 127] (-128 would not negate), which is what the Q8_0 and Q8_K
// quantizers produce; weights may hold -128 (|-128| reads as the unsigned 128).
template <class Dec>
struct SignedLegacy {
    using W = typename Dec::Block;
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        const W* w = static_cast<const W*>(wv);
        const TokenRows<block_q8_0, NT> y(a, stride);
        const int64_t nb = n / 32;
        __m256 acc0[NT], acc1[NT];
        for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
        auto step = [&](int64_t ib, __m256 * acc) __attribute__((always_inline)) {
            const __m256i q = Dec::decode(w[ib]);
            const __m256i uq = _mm256_sign_epi8(q, q);
            const float dw = h2f(w[ib].d);
            if constexpr (NT == 1) {
                const block_q8_0& yb = y.row[0][ib];
                const __m256i p = dot_us(uq, _mm256_sign_epi8(load256(yb.qs), q));
                acc[0] =
                    _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(yb.d)), _mm256_cvtepi32_ps(p), acc[0]);
            } else {
                const __m256 sc = token_scales(y, ib, dw);
                auto one = [&]<int T>() __attribute__((always_inline)) {
                    const __m256i p = dot_us(uq, _mm256_sign_epi8(load256(y.row[T][ib].qs), q));
                    acc[T] = _mm256_fmadd_ps(splat_token<T>(sc), _mm256_cvtepi32_ps(p), acc[T]);
                };
                [&]<int... T>(std::integer_sequence<int, T...>) __attribute__((always_inline)) {
                    (one.template operator()<T>(), ...);
                }
                (std::make_integer_sequence<int, NT>{});
            }
        };
        int64_t ib = 0;
        for (; ib + 2 <= nb; ib += 2) {
            step(ib, acc0);
            step(ib + 1, acc1);
        }
        if (ib < nb) step(ib, acc0);
        for (int t = 0; t < NT; ++t) out[t] = hsum(_mm256_add_ps(acc0[t], acc1[t]));
    }
};

struct DecQ8_0 {
    using Block = block_q8_0;
    static SPECULA_INLINE __m256i decode(const Block& b) { return load256(b.qs); }
};
struct DecQ4_0 {
    using Block = block_q4_0;
    static SPECULA_INLINE __m256i decode(const Block& b) {
        return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8));
    }
};
struct DecQ5_0 {
    using Block = block_q5_0;
    static SPECULA_INLINE __m256i decode(const Block& b) {
        uint32_t qh;
        std::memcpy(&qh, b.qh, 4);
        const __m256i hi = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), hi), _mm256_set1_epi8(16));
    }
};
struct DecIQ4_NL {
    using Block = block_iq4_nl;
    static SPECULA_INLINE __m256i decode(const Block& b) {
        const __m256i table = _mm256_broadcastsi128_si256(load128(kvalues_iq4nl));
        return _mm256_shuffle_epi8(table, nibbles32(b.qs));
    }
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
        __m256 acc0[NT], acc1[NT];
        float mins[NT];
        for (int t = 0; t < NT; ++t) {
            acc0[t] = acc1[t] = _mm256_setzero_ps();
            mins[t] = 0.0f;
        }
        auto step = [&](int64_t ib, __m256 * acc) __attribute__((always_inline)) {
            const __m256i q = Dec::decode(w[ib]);
            const float dw = h2f(w[ib].d), mw = h2f(w[ib].m);
            for (int t = 0; t < NT; ++t) {
                const block_q8_1& yb = y.row[t][ib];
                const __m256i p = dot_us(q, load256(yb.qs));
                acc[t] =
                    _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(yb.d)), _mm256_cvtepi32_ps(p), acc[t]);
                mins[t] = _mm_cvtss_f32(
                    _mm_fmadd_ss(_mm_set_ss(mw), _mm_set_ss(h2f(yb.s)), _mm_set_ss(mins[t])));
            }
        };
        int64_t ib = 0;
        for (; ib + 2 <= nb; ib += 2) {
            step(ib, acc0);
            step(ib + 1, acc1);
        }
        if (ib < nb) step(ib, acc0);
        for (int t = 0; t < NT; ++t) out[t] = hsum(_mm256_add_ps(acc0[t], acc1[t])) + mins[t];
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

// ---- K-quants and IQ4_XS against Q8_K ---------------------------------------------------------
// Per super-block and token: an exact int32 vector sum (sub-block dots times integer scales),
// then acc += (d_w d_a) * sum, and for formats with mins acc += (-dmin_w d_a) * min_sum.

// int16 vector holding scale s_lo in the low 128-bit lane and s_hi in the high lane: the scales of
// the two 16-element groups that one 32-byte maddubs covers.
SPECULA_INLINE __m256i lane_scales(int s_lo, int s_hi) {
    return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(s_hi)),
                            _mm_set1_epi16(static_cast<short>(s_lo)));
}

SPECULA_INLINE __m256i load_bsums(const block_q8_K& y) {
    return load256(y.bsums);
}

// Super-block loop shared by the K-quants: Dec::decode fills a per-block struct once, and
// Dec::dot(decoded, y) returns the (int sum, int min sum) vectors for one token.
template <class Dec>
struct KQuant {
    using W = typename Dec::Block;
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        const W* w = static_cast<const W*>(wv);
        const TokenRows<block_q8_K, NT> y(a, stride);
        const int64_t nb = n / QK_K;
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        typename Dec::Decoded d;
        for (int64_t ib = 0; ib < nb; ++ib) {
            Dec::decode(w[ib], d);
            for (int t = 0; t < NT; ++t) {
                const block_q8_K& yb = y.row[t][ib];
                __m256i mins;
                const __m256i sum = Dec::dot(d, yb, mins);
                acc[t] =
                    _mm256_fmadd_ps(_mm256_set1_ps(d.d * yb.d), _mm256_cvtepi32_ps(sum), acc[t]);
                if constexpr (Dec::kHasMins) {
                    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(-d.dmin * yb.d),
                                             _mm256_cvtepi32_ps(mins), acc[t]);
                }
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
    }
};

// Q4_K / Q5_K: the 8 (scale, min) pairs, unpacked from their 12-byte 6-bit packing.
SPECULA_INLINE void unpack_k4_scales(const uint8_t* packed, uint8_t* sc, uint8_t* m) {
    uint32_t u[3];
    std::memcpy(u, packed, 12);
    const uint32_t sc_lo = u[0] & 0x3F3F3F3Fu, m_lo = u[1] & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    std::memcpy(sc, &sc_lo, 4);
    std::memcpy(sc + 4, &sc_hi, 4);
    std::memcpy(m, &m_lo, 4);
    std::memcpy(m + 4, &m_hi, 4);
}

// The 8 mins as int16, each repeated for the two 16-element bsums of its 32-element sub-block.
SPECULA_INLINE __m256i pair_mins16(const uint8_t* m) {
    uint64_t m8;
    std::memcpy(&m8, m, 8);
    const __m128i v = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m8)));
    return _mm256_set_m128i(_mm_unpackhi_epi16(v, v), _mm_unpacklo_epi16(v, v));
}

struct DecQ4_K {
    using Block = block_q4_K;
    static constexpr bool kHasMins = true;
    struct Decoded {
        float d, dmin;
        __m256i q[8];      // sub-block s: 32 unsigned 4-bit values
        __m256i scale[4];  // int16 scale of sub-blocks 2j (in every lane) and 2j + 1 ...
        __m256i scale_hi[4];
        __m256i mins16;
    };
    static SPECULA_INLINE void decode(const Block& b, Decoded& d) {
        d.d = h2f(b.d);
        d.dmin = h2f(b.dmin);
        uint8_t sc[8], m[8];
        unpack_k4_scales(b.scales, sc, m);
        const __m256i mask = _mm256_set1_epi8(0x0F);
        for (int j = 0; j < 4; ++j) {
            const __m256i q = load256(b.qs + 32 * j);
            d.q[2 * j] = _mm256_and_si256(q, mask);
            d.q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
            d.scale[j] = _mm256_set1_epi16(sc[2 * j]);
            d.scale_hi[j] = _mm256_set1_epi16(sc[2 * j + 1]);
        }
        d.mins16 = pair_mins16(m);
    }
    // Sub-blocks 2j and 2j + 1 only (for K4Tokens).
    static SPECULA_INLINE void decode_pair(const Block& b, int j, __m256i& lo, __m256i& hi) {
        const __m256i mask = _mm256_set1_epi8(0x0F);
        const __m256i q = load256(b.qs + 32 * j);
        lo = _mm256_and_si256(q, mask);
        hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
    }
    static SPECULA_INLINE __m256i dot(const Decoded& d, const block_q8_K& y, __m256i& mins) {
        __m256i sum = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i lo = dot_us_scaled(d.q[2 * j], load256(y.qs + 64 * j), d.scale[j]);
            const __m256i hi =
                dot_us_scaled(d.q[2 * j + 1], load256(y.qs + 64 * j + 32), d.scale_hi[j]);
            sum = _mm256_add_epi32(sum, _mm256_add_epi32(lo, hi));
        }
        mins = _mm256_madd_epi16(load_bsums(y), d.mins16);
        return sum;
    }
};

struct DecQ5_K {
    using Block = block_q5_K;
    static constexpr bool kHasMins = true;
    using Decoded = DecQ4_K::Decoded;
    static SPECULA_INLINE void decode(const Block& b, Decoded& d) {
        d.d = h2f(b.d);
        d.dmin = h2f(b.dmin);
        uint8_t sc[8], m[8];
        unpack_k4_scales(b.scales, sc, m);
        const __m256i mask = _mm256_set1_epi8(0x0F);
        const __m256i qh = load256(b.qh);
        const __m256i ten = _mm256_set1_epi8(0x10);
        for (int j = 0; j < 4; ++j) {
            const __m256i q = load256(b.qs + 32 * j);
            const __m256i b_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * j)));
            const __m256i b_hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1)));
            const __m256i h_lo =
                _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b_lo), b_lo), ten);
            const __m256i h_hi =
                _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b_hi), b_hi), ten);
            d.q[2 * j] = _mm256_or_si256(_mm256_and_si256(q, mask), h_lo);
            d.q[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), mask), h_hi);
            d.scale[j] = _mm256_set1_epi16(sc[2 * j]);
            d.scale_hi[j] = _mm256_set1_epi16(sc[2 * j + 1]);
        }
        d.mins16 = pair_mins16(m);
    }
    // Sub-blocks 2j and 2j + 1 only (for K4Tokens), the same values as decode.
    static SPECULA_INLINE void decode_pair(const Block& b, int j, __m256i& lo, __m256i& hi) {
        const __m256i mask = _mm256_set1_epi8(0x0F), ten = _mm256_set1_epi8(0x10);
        const __m256i q = load256(b.qs + 32 * j), qh = load256(b.qh);
        const __m256i b_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * j)));
        const __m256i b_hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1)));
        const __m256i h_lo =
            _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b_lo), b_lo), ten);
        const __m256i h_hi =
            _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b_hi), b_hi), ten);
        lo = _mm256_or_si256(_mm256_and_si256(q, mask), h_lo);
        hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), mask), h_hi);
    }
    static SPECULA_INLINE __m256i dot(const Decoded& d, const block_q8_K& y, __m256i& mins) {
        return DecQ4_K::dot(d, y, mins);
    }
};

// Q4_K / Q5_K for several tokens: the same per-token int32 sums and float steps as KQuant<Dec>, but
// the super-block is decoded one 64-element pair of sub-blocks at a time and folded into every
// token's integer sum before the next pair, so the decoded weights stay in registers instead of
// spilling. Integer sums are exact, so the reordering leaves every bit of out[t] unchanged.
template <class Dec>
struct K4Tokens {
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        if constexpr (NT == 1) {
            KQuant<Dec>::template run<1>(n, wv, a, stride, out);
        } else {
            const auto* w = static_cast<const typename Dec::Block*>(wv);
            const TokenRows<block_q8_K, NT> y(a, stride);
            const int64_t nb = n / QK_K;
            __m256 acc[NT];
            for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
            for (int64_t ib = 0; ib < nb; ++ib) {
                const auto& b = w[ib];
                uint8_t sc[8], m[8];
                unpack_k4_scales(b.scales, sc, m);
                __m256i sum[NT];
                for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
                for (int j = 0; j < 4; ++j) {
                    __m256i q_lo, q_hi;
                    Dec::decode_pair(b, j, q_lo, q_hi);
                    const __m256i s_lo = _mm256_set1_epi16(sc[2 * j]);
                    const __m256i s_hi = _mm256_set1_epi16(sc[2 * j + 1]);
                    for (int t = 0; t < NT; ++t) {
                        const int8_t* yq = y.row[t][ib].qs + 64 * j;
                        const __m256i lo = dot_us_scaled(q_lo, load256(yq), s_lo);
                        const __m256i hi = dot_us_scaled(q_hi, load256(yq + 32), s_hi);
                        sum[t] = _mm256_add_epi32(sum[t], _mm256_add_epi32(lo, hi));
                    }
                }
                const float d = h2f(b.d), dmin = h2f(b.dmin);
                const __m256i mins16 = pair_mins16(m);
                for (int t = 0; t < NT; ++t) {
                    const block_q8_K& yb = y.row[t][ib];
                    const __m256i mins = _mm256_madd_epi16(load_bsums(yb), mins16);
                    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * yb.d), _mm256_cvtepi32_ps(sum[t]),
                                             acc[t]);
                    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(-dmin * yb.d), _mm256_cvtepi32_ps(mins),
                                             acc[t]);
                }
            }
            for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
        }
    }
};

// Formats with 16-element groups (Q2_K, Q3_K, Q6_K): 8 chunks of 32 unsigned values, chunk c
// covering groups 2c and 2c + 1, with an int16 scale vector per chunk. Values are stored with a
// non-negative offset (Q3_K +4, Q6_K +32) that is taken back through the bsums.
struct Chunks16 {
    float d, dmin;
    __m256i q[8];
    __m256i scale[8];  // lane_scales(s[2c], s[2c + 1])
    __m256i scales16;  // the 16 group scales as int16 (for the offset / min term)
};

SPECULA_INLINE __m256i chunk_sum(const Chunks16& d, const block_q8_K& y) {
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
        sum = _mm256_add_epi32(sum, dot_us_scaled(d.q[c], load256(y.qs + 32 * c), d.scale[c]));
    }
    return sum;
}

struct DecQ2_K {
    using Block = block_q2_K;
    static constexpr bool kHasMins = true;
    using Decoded = Chunks16;
    static SPECULA_INLINE void decode(const Block& b, Decoded& d) {
        d.d = h2f(b.d);
        d.dmin = h2f(b.dmin);
        const __m256i three = _mm256_set1_epi8(3);
        for (int h = 0; h < 2; ++h) {
            const __m256i q = load256(b.qs + 32 * h);
            for (int j = 0; j < 4; ++j) {
                const int c = 4 * h + j;
                d.q[c] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
                d.scale[c] = lane_scales(b.scales[2 * c] & 0x0F, b.scales[2 * c + 1] & 0x0F);
            }
        }
        // Mins (high nibbles) as int16.
        const __m128i s = load128(b.scales);
        d.scales16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0F)));
    }
    static SPECULA_INLINE __m256i dot(const Decoded& d, const block_q8_K& y, __m256i& mins) {
        mins = _mm256_madd_epi16(load_bsums(y), d.scales16);
        return chunk_sum(d, y);
    }
};

struct DecQ3_K {
    using Block = block_q3_K;
    static constexpr bool kHasMins = false;
    using Decoded = Chunks16;
    static SPECULA_INLINE void unpack_scales(const uint8_t* p, int8_t* s) {
        for (int j = 0; j < 16; ++j) {
            const int lo = j < 8 ? (p[j] & 0x0F) : (p[j - 8] >> 4);
            const int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
            s[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
        }
    }
    static SPECULA_INLINE void decode(const Block& b, Decoded& d) {
        d.d = h2f(b.d);
        d.dmin = 0.0f;
        int8_t s[16];
        unpack_scales(b.scales, s);
        const __m256i three = _mm256_set1_epi8(3);
        const __m256i four = _mm256_set1_epi8(4);
        const __m256i hm = load256(b.hmask);
        for (int h = 0; h < 2; ++h) {
            const __m256i q = load256(b.qs + 32 * h);
            for (int j = 0; j < 4; ++j) {
                const int c = 4 * h + j;
                const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << c));
                const __m256i high =
                    _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), four);
                // value + 4 = low 2 bits + 4 * hmask bit, in 0..7
                d.q[c] =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three), high);
                d.scale[c] = lane_scales(s[2 * c], s[2 * c + 1]);
            }
        }
        d.scales16 = _mm256_cvtepi8_epi16(load128(s));
    }
    static SPECULA_INLINE __m256i dot(const Decoded& d, const block_q8_K& y, __m256i& mins) {
        mins = _mm256_setzero_si256();
        const __m256i offset = _mm256_madd_epi16(load_bsums(y), d.scales16);
        return _mm256_sub_epi32(chunk_sum(d, y), _mm256_slli_epi32(offset, 2));
    }
};

struct DecQ6_K {
    using Block = block_q6_K;
    static constexpr bool kHasMins = false;
    using Decoded = Chunks16;
    static SPECULA_INLINE void decode(const Block& b, Decoded& d) {
        d.d = h2f(b.d);
        d.dmin = 0.0f;
        const __m256i mask = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
        for (int h = 0; h < 2; ++h) {
            const __m256i ql0 = load256(b.ql + 64 * h), ql1 = load256(b.ql + 64 * h + 32);
            const __m256i qh = load256(b.qh + 32 * h);
            const __m256i low[4] = {_mm256_and_si256(ql0, mask), _mm256_and_si256(ql1, mask),
                                    _mm256_and_si256(_mm256_srli_epi16(ql0, 4), mask),
                                    _mm256_and_si256(_mm256_srli_epi16(ql1, 4), mask)};
            for (int k = 0; k < 4; ++k) {
                const int c = 4 * h + k;
                const __m256i high =
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three), 4);
                d.q[c] = _mm256_or_si256(low[k], high);  // value + 32, in 0..63
                d.scale[c] = lane_scales(b.scales[2 * c], b.scales[2 * c + 1]);
            }
        }
        d.scales16 = _mm256_cvtepi8_epi16(load128(b.scales));
    }
    static SPECULA_INLINE __m256i dot(const Decoded& d, const block_q8_K& y, __m256i& mins) {
        mins = _mm256_setzero_si256();
        const __m256i offset = _mm256_madd_epi16(load_bsums(y), d.scales16);
        return _mm256_sub_epi32(chunk_sum(d, y), _mm256_slli_epi32(offset, 5));
    }
};

// Q6_K for several tokens, like K4Tokens: one 32-element chunk is decoded at a time and folded
// into every token's exact int32 sum, then each token takes the same offset correction and float
// step as KQuant<DecQ6_K>.
struct Q6KTokens {
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        if constexpr (NT == 1) {
            KQuant<DecQ6_K>::run<1>(n, wv, a, stride, out);
        } else {
            const auto* w = static_cast<const block_q6_K*>(wv);
            const TokenRows<block_q8_K, NT> y(a, stride);
            const int64_t nb = n / QK_K;
            __m256 acc[NT];
            for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
            for (int64_t ib = 0; ib < nb; ++ib) {
                const block_q6_K& b = w[ib];
                __m256i sum[NT];
                for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
                const __m256i mask = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
                for (int h = 0; h < 2; ++h) {
                    const __m256i ql0 = load256(b.ql + 64 * h), ql1 = load256(b.ql + 64 * h + 32);
                    const __m256i qh = load256(b.qh + 32 * h);
                    for (int k = 0; k < 4; ++k) {
                        const int c = 4 * h + k;
                        const __m256i ql = k % 2 ? ql1 : ql0;
                        const __m256i low =
                            _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), mask);
                        const __m256i high = _mm256_slli_epi16(
                            _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three), 4);
                        const __m256i q = _mm256_or_si256(low, high);  // value + 32, in 0..63
                        const __m256i scale = lane_scales(b.scales[2 * c], b.scales[2 * c + 1]);
                        for (int t = 0; t < NT; ++t) {
                            const __m256i p =
                                dot_us_scaled(q, load256(y.row[t][ib].qs + 32 * c), scale);
                            sum[t] = _mm256_add_epi32(sum[t], p);
                        }
                    }
                }
                const float d = h2f(b.d);
                const __m256i scales16 = _mm256_cvtepi8_epi16(load128(b.scales));
                for (int t = 0; t < NT; ++t) {
                    const block_q8_K& yb = y.row[t][ib];
                    const __m256i offset = _mm256_madd_epi16(load_bsums(yb), scales16);
                    const __m256i s = _mm256_sub_epi32(sum[t], _mm256_slli_epi32(offset, 5));
                    acc[t] =
                        _mm256_fmadd_ps(_mm256_set1_ps(d * yb.d), _mm256_cvtepi32_ps(s), acc[t]);
                }
            }
            for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
        }
    }
};

struct DecIQ4_XS {
    using Block = block_iq4_xs;
    static constexpr bool kHasMins = false;
    struct Decoded {
        float d, dmin;
        __m256i uq[8];     // |value| of sub-block s
        __m256i q[8];      // value (for its sign)
        __m256i scale[8];  // int16 sub-block scale, every lane
    };
    static SPECULA_INLINE void decode(const Block& b, Decoded& d) {
        d.d = h2f(b.d);
        d.dmin = 0.0f;
        const __m256i table = _mm256_broadcastsi128_si256(load128(kvalues_iq4nl));
        for (int s = 0; s < 8; ++s) {
            const __m256i q = _mm256_shuffle_epi8(table, nibbles32(b.qs + 16 * s));
            d.q[s] = q;
            d.uq[s] = _mm256_sign_epi8(q, q);
            const int lo = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
            const int hi = (b.scales_h >> (2 * s)) & 3;
            d.scale[s] = _mm256_set1_epi16(static_cast<short>((lo | (hi << 4)) - 32));
        }
    }
    static SPECULA_INLINE __m256i dot(const Decoded& d, const block_q8_K& y, __m256i& mins) {
        mins = _mm256_setzero_si256();
        __m256i sum = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
            const __m256i a = _mm256_sign_epi8(load256(y.qs + 32 * s), d.q[s]);
            sum = _mm256_add_epi32(sum, dot_us_scaled(d.uq[s], a, d.scale[s]));
        }
        return sum;
    }
};

// ---- float formats ------------------------------------------------------------------------------
// 16 elements per step into two accumulators per token; a tail of n % 16 elements is done 8 wide
// and then one by one, always in the same order for a given n.

struct LoadF32 {
    using T = float;
    static SPECULA_INLINE __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
    static SPECULA_INLINE float load1(const float* p) { return *p; }
};
struct LoadF16 {
    using T = fp16_t;
    static SPECULA_INLINE __m256 load8(const fp16_t* p) { return _mm256_cvtph_ps(load128(p)); }
    static SPECULA_INLINE float load1(const fp16_t* p) { return h2f(*p); }
};
struct LoadBF16 {
    using T = bf16_t;
    static SPECULA_INLINE __m256 load8(const bf16_t* p) {
        const __m256i v = _mm256_cvtepu16_epi32(load128(p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    static SPECULA_INLINE float load1(const bf16_t* p) {
        const uint32_t u = static_cast<uint32_t>(*p) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};

template <class L>
struct FloatDot {
    using T = typename L::T;
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        const T* w = static_cast<const T*>(wv);
        const TokenRows<T, NT> y(a, stride);
        __m256 acc0[NT], acc1[NT];
        for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            const __m256 w0 = L::load8(w + i), w1 = L::load8(w + i + 8);
            for (int t = 0; t < NT; ++t) {
                acc0[t] = _mm256_fmadd_ps(w0, L::load8(y.row[t] + i), acc0[t]);
                acc1[t] = _mm256_fmadd_ps(w1, L::load8(y.row[t] + i + 8), acc1[t]);
            }
        }
        if (i + 8 <= n) {
            const __m256 w0 = L::load8(w + i);
            for (int t = 0; t < NT; ++t) {
                acc0[t] = _mm256_fmadd_ps(w0, L::load8(y.row[t] + i), acc0[t]);
            }
            i += 8;
        }
        for (int t = 0; t < NT; ++t) {
            float s = hsum(_mm256_add_ps(acc0[t], acc1[t]));
            for (int64_t k = i; k < n; ++k) {
                s = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(L::load1(w + k)),
                                               _mm_set_ss(L::load1(y.row[t] + k)), _mm_set_ss(s)));
            }
            out[t] = s;
        }
    }
};

VecDotFn x86_vec_dot(GGMLType wt) {
    switch (wt) {
        case GGMLType::F32:
            return &vec_dot_tokens<FloatDot<LoadF32>>;
        case GGMLType::F16:
            return &vec_dot_tokens<FloatDot<LoadF16>>;
        case GGMLType::BF16:
            return &vec_dot_tokens<FloatDot<LoadBF16>>;
        case GGMLType::Q8_0:
            return &vec_dot_tokens<SignedLegacy<DecQ8_0>>;
        case GGMLType::Q4_0:
            return &vec_dot_tokens<SignedLegacy<DecQ4_0>>;
        case GGMLType::Q5_0:
            return &vec_dot_tokens<SignedLegacy<DecQ5_0>>;
        case GGMLType::IQ4_NL:
            return &vec_dot_tokens<SignedLegacy<DecIQ4_NL>>;
        case GGMLType::Q4_1:
            return &vec_dot_tokens<MinLegacy<DecQ4_1>>;
        case GGMLType::Q5_1:
            return &vec_dot_tokens<MinLegacy<DecQ5_1>>;
        case GGMLType::Q2_K:
            return &vec_dot_tokens<KQuant<DecQ2_K>>;
        case GGMLType::Q3_K:
            return &vec_dot_tokens<KQuant<DecQ3_K>>;
        case GGMLType::Q4_K:
            return &vec_dot_tokens<K4Tokens<DecQ4_K>>;
        case GGMLType::Q5_K:
            return &vec_dot_tokens<K4Tokens<DecQ5_K>>;
        case GGMLType::Q6_K:
            return &vec_dot_tokens<Q6KTokens>;
        case GGMLType::IQ4_XS:
            return &vec_dot_tokens<KQuant<DecIQ4_XS>>;
        default:
            return nullptr;
    }
}

}  // namespace
}  // namespace specula::simd
