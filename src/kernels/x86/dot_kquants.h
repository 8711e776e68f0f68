// K-quants (Q2_K..Q6_K) and IQ4_XS against Q8_K activations.
// Part of the x86 row-layout kernels (x86/dot_common.h says how they are built).
// ---- K-quants and IQ4_XS against Q8_K ---------------------------------------------------------
// Per super-block and token: an exact int32 vector sum (sub-block dots times integer scales),
// then acc += (d_w d_a) * sum, and for formats with mins acc += (-dmin_w d_a) * min_sum.
// Q2_K, Q3_K and IQ4_XS decode a whole super-block and take tokens in groups of up to 4
// (KQuant, in groups of up to kKQuantGroupMax); Q4_K, Q5_K and Q6_K have verify-batch kernels of
// their own further down (groups of up to kKGroupMax = 8).
#pragma once

#include "kernels/x86/dot_common.h"

namespace specula::simd {
namespace {

// int16 vector holding scale s_lo in the low 128-bit lane and s_hi in the high lane: the scales of
// the two 16-element groups that one 32-byte maddubs covers.
SPECULA_INLINE __m256i lane_scales(int s_lo, int s_hi) {
    return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(s_hi)),
                            _mm_set1_epi16(static_cast<short>(s_lo)));
}

SPECULA_INLINE __m256i load_bsums(const block_q8_K& y) {
    return load256(y.bsums);
}

constexpr int kKQuantGroupMax = 4;  // tokens per pass of the generic KQuant loop

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
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
    }
};

// ---- Q4_K, Q5_K and Q6_K for groups of up to 8 tokens ------------------------------------------
// These three formats are the bulk of the common *_K_M files, so they get kernels of their own:
// one 32-element piece of a super-block is decoded at a time and folded into every token's exact
// int32 sum (maddubs, then maddwd with the piece's int16 scale: two multiply-class instructions per
// 32 weights and token, the floor on AVX2), and each token then takes one fixed sequence of float
// steps per super-block. Up to 8 running sums fit in the 16 vector registers next to the decoded
// piece, so a verify batch of 5 or 9 tokens streams and decodes each row once or twice, and the
// groups are balanced (9 = 5 + 4) rather than 8 + 1. The float sequence of a token does not
// depend on its group, so out[t] is bit-identical for any ntok.

constexpr int kKGroupMax = 8;  // tokens per pass over a row (vec_dot_groups)

// An empty asm that claims to rewrite v: each token's running sum is then kept in a register and
// added to in program order, instead of being regrouped into a tree of spilled partial products.
SPECULA_INLINE void pin(__m256i& v) {
    asm("" : "+v"(v));
}

// int16 word w (0..7) of each 128-bit lane of v, in all 16 lanes.
SPECULA_INLINE __m256i splat_word(__m256i v, int w) {
    return _mm256_shuffle_epi8(v,
                               _mm256_set1_epi16(static_cast<short>(((2 * w + 1) << 8) | 2 * w)));
}

// Q4_K / Q5_K: the 8 6-bit scales and 8 6-bit mins of the 12-byte packing, one per byte.
SPECULA_INLINE void unpack_k4_scales(const uint8_t* packed, uint64_t& sc, uint64_t& m) {
    uint64_t u01;  // two loads straight into registers (a 12-byte memcpy goes through the stack)
    uint32_t u2;
    std::memcpy(&u01, packed, 8);
    std::memcpy(&u2, packed + 8, 4);
    const uint32_t u0 = static_cast<uint32_t>(u01), u1 = static_cast<uint32_t>(u01 >> 32);
    const uint32_t sc_lo = u0 & 0x3F3F3F3Fu, m_lo = u1 & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (u2 & 0x0F0F0F0Fu) | (((u0 >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((u2 >> 4) & 0x0F0F0F0Fu) | (((u1 >> 6) & 0x03030303u) << 4);
    sc = sc_lo | static_cast<uint64_t>(sc_hi) << 32;
    m = m_lo | static_cast<uint64_t>(m_hi) << 32;
}

// 8 bytes as int16, in both 128-bit lanes.
SPECULA_INLINE __m256i bytes_to_words2(uint64_t b) {
    const __m128i v = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(b)));
    return _mm256_broadcastsi128_si256(v);
}

// The 8 mins as int16, each repeated for the two 16-element bsums of its 32-element sub-block.
SPECULA_INLINE __m256i pair_mins16(uint64_t m) {
    const __m128i v = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m)));
    return _mm256_set_m128i(_mm_unpackhi_epi16(v, v), _mm_unpacklo_epi16(v, v));
}

// Sub-block s (elements 32s .. 32s + 31) as 32 unsigned values: the low nibbles of qs[32j ..]
// hold sub-block 2j, the high nibbles 2j + 1; Q5_K adds bit s of qh[i] as 16.
SPECULA_INLINE __m256i nibble_sub_block(const uint8_t* qs, int s) {
    const __m256i q = load256(qs + 32 * (s / 2));
    return _mm256_and_si256(s % 2 ? _mm256_srli_epi16(q, 4) : q, _mm256_set1_epi8(0x0F));
}

struct DecQ4_K {
    using Block = block_q4_K;
    static SPECULA_INLINE __m256i sub_block(const Block& b, int s) {
        return nibble_sub_block(b.qs, s);
    }
};

struct DecQ5_K {
    using Block = block_q5_K;
    static SPECULA_INLINE __m256i sub_block(const Block& b, int s) {
        const __m256i qh = load256(b.qh);  // bit s to bit 4; 16-bit shifts by <= 4 stay in the byte
        const __m256i h = s <= 4 ? _mm256_slli_epi16(qh, 4 - s) : _mm256_srli_epi16(qh, s - 4);
        return _mm256_or_si256(nibble_sub_block(b.qs, s),
                               _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
    }
};

// Q4_K / Q5_K: per super-block and token, sum = sum_s scale_s * (q_s . y_s) and
// min_sum = sum_s min_s * (bsums of sub-block s), then acc += d_a (d_w sum - dmin_w min_sum)
// (d_w and dmin_w are shared by the group's tokens, so no scalar product per token).
template <class Dec>
struct K4Tokens {
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        const auto* w = static_cast<const typename Dec::Block*>(wv);
        const TokenRows<block_q8_K, NT> y(a, stride);
        const int64_t nb = n / QK_K;
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t ib = 0; ib < nb; ++ib) {
            const auto& b = w[ib];
            prefetch_ahead(&b);
            uint64_t sc, m;
            unpack_k4_scales(b.scales, sc, m);
            const __m256i scales16 = bytes_to_words2(sc);
            __m256i sum[NT];
            for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int s = 0; s < 8; ++s) {
                const __m256i q = Dec::sub_block(b, s);
                const __m256i scale = splat_word(scales16, s);
#pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) {
                    const __m256i p = dot_us_scaled(q, load256(y.row[t][ib].qs + 32 * s), scale);
                    sum[t] = _mm256_add_epi32(sum[t], p);
                    pin(sum[t]);
                }
            }
            const __m256 d = _mm256_set1_ps(h2f(b.d)), neg_dmin = _mm256_set1_ps(-h2f(b.dmin));
            const __m256i mins16 = pair_mins16(m);
            for (int t = 0; t < NT; ++t) {
                const block_q8_K& yb = y.row[t][ib];
                const __m256i mins = _mm256_madd_epi16(load_bsums(yb), mins16);
                const __m256 v = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum[t]),
                                                 _mm256_mul_ps(neg_dmin, _mm256_cvtepi32_ps(mins)));
                acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&yb.d), v, acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
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

// Q6_K: chunk c (elements 32c .. 32c + 31, groups 2c and 2c + 1) is stored as value + 32 in
// 0..63; per super-block and token, sum = sum_c lane_scale_c * (q_c . y_c) - 32 * sum_g scale_g *
// bsum_g, then acc += (d_w d_a) sum.
struct Q6KTokens {
    static SPECULA_INLINE __m256i chunk(const block_q6_K& b, int c) {
        const int h = c / 4, k = c % 4;
        const __m256i ql = load256(b.ql + 64 * h + 32 * (k % 2));
        const __m256i low =
            _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
        const __m256i qh = load256(b.qh + 32 * h);  // bits 2k, 2k + 1 to bits 4, 5 (in the byte)
        const __m256i hs =
            k < 2 ? _mm256_slli_epi16(qh, 4 - 2 * k) : _mm256_srli_epi16(qh, 2 * k - 4);
        return _mm256_or_si256(low, _mm256_and_si256(hs, _mm256_set1_epi8(0x30)));
    }
    // The int16 scales of groups 2c (low lane) and 2c + 1 (high lane), from `half` = the 8 scales
    // of chunks 4 (c / 4) .. 4 (c / 4) + 3 in both lanes.
    static SPECULA_INLINE __m256i chunk_scale(__m256i half, int c) {
        const int k = c % 4;
        const __m256i pick =
            _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2))),
                             _mm_set1_epi16(static_cast<short>(((4 * k + 1) << 8) | 4 * k)));
        return _mm256_shuffle_epi8(half, pick);
    }
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        const auto* w = static_cast<const block_q6_K*>(wv);
        const TokenRows<block_q8_K, NT> y(a, stride);
        const int64_t nb = n / QK_K;
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t ib = 0; ib < nb; ++ib) {
            const block_q6_K& b = w[ib];
            prefetch_ahead(&b);
            const __m256i scales16 = _mm256_cvtepi8_epi16(load128(b.scales));
            // Both 128-bit halves up front: the permute needs an immediate even at -O0.
            const __m256i scales_lo = _mm256_permute2x128_si256(scales16, scales16, 0x00);
            const __m256i scales_hi = _mm256_permute2x128_si256(scales16, scales16, 0x11);
            __m256i sum[NT];
            for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int c = 0; c < 8; ++c) {
                const __m256i half = c < 4 ? scales_lo : scales_hi;
                const __m256i q = chunk(b, c);
                const __m256i scale = chunk_scale(half, c);
#pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) {
                    const __m256i p = dot_us_scaled(q, load256(y.row[t][ib].qs + 32 * c), scale);
                    sum[t] = _mm256_add_epi32(sum[t], p);
                    pin(sum[t]);
                }
            }
            const float d = h2f(b.d);
            for (int t = 0; t < NT; ++t) {
                const block_q8_K& yb = y.row[t][ib];
                const __m256i offset = _mm256_madd_epi16(load_bsums(yb), scales16);
                const __m256i s = _mm256_sub_epi32(sum[t], _mm256_slli_epi32(offset, 5));
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * yb.d), _mm256_cvtepi32_ps(s), acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
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

}  // namespace
}  // namespace specula::simd
