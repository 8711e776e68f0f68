// Q4_K, Q5_K and Q6_K with 512-bit registers, for kernels/avx512/dot.cpp (it uses the K-quant
// helpers of kernels/x86/dot_kquants.h).
//
// Two kernels, each computing exactly what the 256-bit kernels (K4Tokens / Q6KTokens in
// x86/dot_kquants.h) compute: the same eight int32 lanes per super-block and token (integer sums
// are exact, so how they are split and fused changes no bit), then the same float steps and the
// same horizontal sum. Their results therefore equal the AVX2 level's bit for bit, for any number
// of tokens (batch invariance is inherited, not re-proved).
// - Row pairs (VecDotRows2Fn, K4Rows2 / Q6KRows2): a zmm holds one 32-element piece of row 0 in
//   its low half and the same piece of row 1 in its high half, each token's piece of activations
//   broadcast to both; one vpmaddubsw + one vpdpwssd (the int16 scale product and the accumulation
//   in one instruction) do the work of vpmaddubsw + vpmaddwd + vpaddd on two rows.
// - One row (the AVX-512 VecDotFn, K4Row512 / Q6KRow512): a zmm holds two consecutive pieces of
//   the row against the token's 64 contiguous activation bytes; the halves are added once per
//   super-block (an exact int32 add) to give the eight lanes.
#pragma once

#include "kernels/x86/dot_kquants.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__)
#error "avx512/dot_kquants512.h is for files compiled with AVX-512 VL and VNNI enabled"
#endif

namespace specula::simd {
namespace {

// GCC 12 flags the deliberately undefined pass-through operand inside its own
// _mm512_broadcast_i64x4 / _mm512_inserti64x4 (GCC bug 105593); nothing here reads it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

constexpr int kRows2GroupMax = 8;  // tokens per pass over a row pair (2 accumulators each)

SPECULA_INLINE __m512i pair256(const void* p0, const void* p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(p0)), load256(p1), 1);
}
SPECULA_INLINE __m512i bcast256(const void* p) {
    return _mm512_broadcast_i64x4(load256(p));
}
SPECULA_INLINE __m512 pair_ps(float lo, float hi) {
    return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

// 16 bytes u (8 of row 0, then 8 of row 1) as 32 int16: byte pshufb pattern `pat` (per 128-bit lane
// of a 256-bit register holding u twice) picks and orders them, then they are widened (signed or
// not).
template <bool kSigned>
SPECULA_INLINE __m512i widen_pair(__m128i u, __m256i pat) {
    const __m256i b = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(u), pat);
    return kSigned ? _mm512_cvtepi8_epi16(b) : _mm512_cvtepu8_epi16(b);
}
// Pattern: 8 bytes of row r repeated twice in 128-bit lane r (for splat_word).
SPECULA_INLINE __m256i pat_twice() {
    return _mm256_set_epi8(15, 14, 13, 12, 11, 10, 9, 8, 15, 14, 13, 12, 11, 10, 9, 8,  //
                           7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0);
}
// Pattern: each byte of row r doubled in 128-bit lane r (pair_mins16 for both rows).
SPECULA_INLINE __m256i pat_doubled() {
    return _mm256_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8,  //
                           7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
}

// int16 word w (0..7) of each 128-bit lane of v, in all lanes of that 128-bit lane.
SPECULA_INLINE __m512i splat_word512(__m512i v, int w) {
    return _mm512_shuffle_epi8(v,
                               _mm512_set1_epi16(static_cast<short>(((2 * w + 1) << 8) | 2 * w)));
}

// The row pair after this one (the next call's rows: matmul hands rows over in order) is
// requested block by block while this pair is used: one pair's compute time ahead, which is what
// the streams need at 3+ tokens per pass (at 1 or 2 tokens matmul keeps the one-row kernel, whose
// single stream the plain kPrefetchBytes lead serves better).
template <class Block>
SPECULA_INLINE void prefetch_next_pair(const Block* b0, const Block* b1) {
    const auto* p0 = reinterpret_cast<const char*>(b0);
    const auto* p1 = reinterpret_cast<const char*>(b1);
    const ptrdiff_t next = 2 * (p1 - p0);
    for (size_t o = 0; o < sizeof(Block); o += 64) {
        _mm_prefetch(p0 + next + o, _MM_HINT_T0);
        _mm_prefetch(p1 + next + o, _MM_HINT_T0);
    }
}

SPECULA_INLINE void pin512(__m512i& v) {
    asm("" : "+v"(v));
}

// Token t's result for row 0 (low half) and row 1 (high half) of acc, summed as hsum does.
SPECULA_INLINE void store_pair(__m512 acc, float* y) {
    y[0] = hsum8(_mm512_castps512_ps256(acc));
    y[1] = hsum8(_mm512_extractf32x8_ps(acc, 1));
}

// Q4_K / Q5_K: each half is K4Tokens's computation for its row.
struct Dec2Q4_K {
    using Block = block_q4_K;
    struct High {};
    static SPECULA_INLINE High high_bits(const Block&, const Block&) { return {}; }
    static SPECULA_INLINE __m512i add_high(__m512i q, High, int) { return q; }
};
struct Dec2Q5_K {
    using Block = block_q5_K;
    using High = __m512i;
    static SPECULA_INLINE High high_bits(const Block& b0, const Block& b1) {
        return pair256(b0.qh, b1.qh);
    }
    static SPECULA_INLINE __m512i add_high(__m512i q, High qh, int s) {
        const __m512i h = s <= 4 ? _mm512_slli_epi16(qh, 4 - s) : _mm512_srli_epi16(qh, s - 4);
        return _mm512_or_si512(q, _mm512_and_si512(h, _mm512_set1_epi8(0x10)));
    }
};

template <class Dec>
struct K4Rows2 {
    using Block = typename Dec::Block;
    template <int NT>
    static void run(int64_t n, const uint8_t* w0, const uint8_t* w1, const uint8_t* a,
                    size_t stride, float* y, size_t ldy) {
        const auto* r0 = reinterpret_cast<const Block*>(w0);
        const auto* r1 = reinterpret_cast<const Block*>(w1);
        const TokenRows<block_q8_K, NT> x(a, stride);
        const int64_t nb = n / QK_K;
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t ib = 0; ib < nb; ++ib) {
            const Block& b0 = r0[ib];
            const Block& b1 = r1[ib];
            prefetch_next_pair(&b0, &b1);
            uint64_t sc0, m0, sc1, m1;
            unpack_k4_scales(b0.scales, sc0, m0);
            unpack_k4_scales(b1.scales, sc1, m1);
            const __m512i scales16 = widen_pair<false>(
                _mm_set_epi64x(static_cast<int64_t>(sc1), static_cast<int64_t>(sc0)), pat_twice());
            const auto high = Dec::high_bits(b0, b1);
            __m512i sum[NT];
            for (int t = 0; t < NT; ++t) sum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const __m512i qs = pair256(b0.qs + 32 * j, b1.qs + 32 * j);
#pragma GCC unroll 2
                for (int h = 0; h < 2; ++h) {
                    const int s = 2 * j + h;
                    const __m512i q = Dec::add_high(
                        _mm512_and_si512(h ? _mm512_srli_epi16(qs, 4) : qs, low4), high, s);
                    const __m512i scale = splat_word512(scales16, s);
#pragma GCC unroll 8
                    for (int t = 0; t < NT; ++t) {
                        const __m512i p =
                            _mm512_maddubs_epi16(q, bcast256(x.row[t][ib].qs + 32 * s));
                        sum[t] = _mm512_dpwssd_epi32(sum[t], p, scale);
                        pin512(sum[t]);
                    }
                }
            }
            const __m512 d = pair_ps(h2f(b0.d), h2f(b1.d));
            const __m512 neg_dmin = pair_ps(-h2f(b0.dmin), -h2f(b1.dmin));
            const __m512i mins16 = widen_pair<false>(
                _mm_set_epi64x(static_cast<int64_t>(m1), static_cast<int64_t>(m0)), pat_doubled());
            for (int t = 0; t < NT; ++t) {
                const block_q8_K& yb = x.row[t][ib];
                const __m512i mins = _mm512_madd_epi16(bcast256(yb.bsums), mins16);
                const __m512 v = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sum[t]),
                                                 _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(mins)));
                acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(yb.d), v, acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) store_pair(acc[t], y + t * ldy);
    }
};

// Q6_K: each half is Q6KTokens's computation for its row; the -32 offset term
// (madd(bsums, scales16) << 5, subtracted) starts each token's sum as madd(bsums, -32 scales16),
// the same integer.
struct Q6KRows2 {
    template <int NT>
    static void run(int64_t n, const uint8_t* w0, const uint8_t* w1, const uint8_t* a,
                    size_t stride, float* y, size_t ldy) {
        const auto* r0 = reinterpret_cast<const block_q6_K*>(w0);
        const auto* r1 = reinterpret_cast<const block_q6_K*>(w1);
        const TokenRows<block_q8_K, NT> x(a, stride);
        const int64_t nb = n / QK_K;
        const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t ib = 0; ib < nb; ++ib) {
            const block_q6_K& b0 = r0[ib];
            const block_q6_K& b1 = r1[ib];
            prefetch_next_pair(&b0, &b1);
            const __m128i s0 = load128(b0.scales), s1 = load128(b1.scales);
            // All 16 scales of each row as int16 times -32 (row 0 low half, row 1 high half).
            const __m512i neg32 = _mm512_sub_epi16(
                _mm512_setzero_si512(),
                _mm512_slli_epi16(_mm512_cvtepi8_epi16(_mm256_set_m128i(s1, s0)), 5));
            // Scales of chunks 0..3 (groups 0..7) and 4..7 (groups 8..15), each row's 8 in both
            // 128-bit lanes of its half (for chunk_scale's in-lane pick).
            const __m512i half_lo = widen_pair<true>(_mm_unpacklo_epi64(s0, s1), pat_twice());
            const __m512i half_hi = widen_pair<true>(_mm_unpackhi_epi64(s0, s1), pat_twice());
            __m512i sum[NT];
            for (int t = 0; t < NT; ++t) {
                sum[t] = _mm512_madd_epi16(bcast256(x.row[t][ib].bsums), neg32);
            }
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                const __m512i qh = pair256(b0.qh + 32 * h, b1.qh + 32 * h);
                const __m512i half = h ? half_hi : half_lo;
#pragma GCC unroll 2
                for (int k2 = 0; k2 < 2; ++k2) {
                    const __m512i ql = pair256(b0.ql + 64 * h + 32 * k2, b1.ql + 64 * h + 32 * k2);
#pragma GCC unroll 2
                    for (int up = 0; up < 2; ++up) {
                        const int k = k2 + 2 * up, c = 4 * h + k;
                        const __m512i low =
                            _mm512_and_si512(up ? _mm512_srli_epi16(ql, 4) : ql, low4);
                        const __m512i hs = k < 2 ? _mm512_slli_epi16(qh, 4 - 2 * k)
                                                 : _mm512_srli_epi16(qh, 2 * k - 4);
                        const __m512i q = _mm512_or_si512(low, _mm512_and_si512(hs, bits45));
                        // Low 128-bit lane of each half: group 2c's scale; high lane: 2c + 1's.
                        const short wlo = static_cast<short>(((4 * k + 1) << 8) | 4 * k);
                        const short whi = static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2));
                        const __m512i pick =
                            _mm512_set_epi16(whi, whi, whi, whi, whi, whi, whi, whi, wlo, wlo, wlo,
                                             wlo, wlo, wlo, wlo, wlo, whi, whi, whi, whi, whi, whi,
                                             whi, whi, wlo, wlo, wlo, wlo, wlo, wlo, wlo, wlo);
                        const __m512i scale = _mm512_shuffle_epi8(half, pick);
#pragma GCC unroll 8
                        for (int t = 0; t < NT; ++t) {
                            const __m512i p =
                                _mm512_maddubs_epi16(q, bcast256(x.row[t][ib].qs + 32 * c));
                            sum[t] = _mm512_dpwssd_epi32(sum[t], p, scale);
                            pin512(sum[t]);
                        }
                    }
                }
            }
            const __m512 d = pair_ps(h2f(b0.d), h2f(b1.d));
            for (int t = 0; t < NT; ++t) {
                const __m512 dd = _mm512_mul_ps(d, _mm512_set1_ps(x.row[t][ib].d));
                acc[t] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(sum[t]), acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) store_pair(acc[t], y + t * ldy);
    }
};

// The VecDotRows2Fn of a kernel K with K::run<NT> for NT = 1..kRows2GroupMax tokens.
template <class K>
void vec_dot_rows2_groups(int64_t n, const void* w, size_t w_stride, const void* a, size_t stride,
                          int ntok, float* y, size_t ldy) {
    const auto* w0 = static_cast<const uint8_t*>(w);
    const auto* ab = static_cast<const uint8_t*>(a);
    balanced_groups<kRows2GroupMax>(ntok, [&](auto nt, int t) {
        K::template run<nt()>(n, w0, w0 + w_stride, ab + t * stride, stride, y + t * ldy, ldy);
    });
}

// ---- one row ------------------------------------------------------------------------------------

// int16 a in the low 256 bits, b in the high 256 bits.
SPECULA_INLINE __m512i halves_epi16(int a, int b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(a))),
                              _mm256_set1_epi16(static_cast<short>(b)), 1);
}
// pshufb pattern: word w0 of each 128-bit lane in the low half, word w1 in the high half.
SPECULA_INLINE __m512i pick_words(int w0, int w1) {
    return halves_epi16(((2 * w0 + 1) << 8) | 2 * w0, ((2 * w1 + 1) << 8) | 2 * w1);
}
SPECULA_INLINE __m512i load512(const void* p) {
    return _mm512_loadu_si512(p);
}
// The eight int32 lanes of the 256-bit kernels: the sum of the two halves.
SPECULA_INLINE __m256i fold_halves(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

struct Dec1Q4_K {
    using Block = block_q4_K;
    struct High {};
    static SPECULA_INLINE High high_bits(const Block&) { return {}; }
    static SPECULA_INLINE __m512i add_high(__m512i q, High, int) { return q; }
};
struct Dec1Q5_K {
    using Block = block_q5_K;
    using High = __m512i;
    static SPECULA_INLINE High high_bits(const Block& b) { return bcast256(b.qh); }
    // Bit s of each qh byte to bit 4 for s = 2j (low half) and 2j + 1 (high half), by the same
    // in-byte 16-bit shifts as DecQ5_K.
    static SPECULA_INLINE __m512i add_high(__m512i q, High qh, int j) {
        const int s0 = 2 * j, s1 = 2 * j + 1;
        const __m512i left = halves_epi16(s0 <= 4 ? 4 - s0 : 0, s1 <= 4 ? 4 - s1 : 0);
        const __m512i right = halves_epi16(s0 > 4 ? s0 - 4 : 0, s1 > 4 ? s1 - 4 : 0);
        const __m512i h = _mm512_srlv_epi16(_mm512_sllv_epi16(qh, left), right);
        return _mm512_or_si512(q, _mm512_and_si512(h, _mm512_set1_epi8(0x10)));
    }
};

// Q4_K / Q5_K: sub-blocks 2j and 2j + 1 (the low and high nibbles of qs[32j ..]) in one zmm.
template <class Dec>
struct K4Row512 {
    using Block = typename Dec::Block;
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        const auto* w = static_cast<const Block*>(wv);
        const TokenRows<block_q8_K, NT> y(a, stride);
        const int64_t nb = n / QK_K;
        const __m512i low4 = _mm512_set1_epi8(0x0F), nibble_shift = halves_epi16(0, 4);
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t ib = 0; ib < nb; ++ib) {
            const Block& b = w[ib];
            prefetch_ahead(&b);
            uint64_t sc, m;
            unpack_k4_scales(b.scales, sc, m);
            const __m512i scales16 = _mm512_broadcast_i32x4(
                _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
            const auto high = Dec::high_bits(b);
            __m512i sum[NT];
            for (int t = 0; t < NT; ++t) sum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const __m512i q = Dec::add_high(
                    _mm512_and_si512(_mm512_srlv_epi16(bcast256(b.qs + 32 * j), nibble_shift),
                                     low4),
                    high, j);
                const __m512i scale = _mm512_shuffle_epi8(scales16, pick_words(2 * j, 2 * j + 1));
#pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) {
                    const __m512i p = _mm512_maddubs_epi16(q, load512(y.row[t][ib].qs + 64 * j));
                    sum[t] = _mm512_dpwssd_epi32(sum[t], p, scale);
                    pin512(sum[t]);
                }
            }
            const __m256 d = _mm256_set1_ps(h2f(b.d)), neg_dmin = _mm256_set1_ps(-h2f(b.dmin));
            const __m256i mins16 = pair_mins16(m);
            for (int t = 0; t < NT; ++t) {
                const block_q8_K& yb = y.row[t][ib];
                const __m256i mins = _mm256_madd_epi16(load_bsums(yb), mins16);
                const __m256 v = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(fold_halves(sum[t])),
                                                 _mm256_mul_ps(neg_dmin, _mm256_cvtepi32_ps(mins)));
                acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&yb.d), v, acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
    }
};

// Q6_K: chunks c0 = 4h + 2u and c0 + 1 in one zmm (ql[64h ..] is their 64 bytes of low nibbles,
// or high ones for u = 1), with the scales of groups 2 c0 .. 2 c0 + 3 in its four 128-bit lanes.
struct Q6KRow512 {
    template <int NT>
    static void run(int64_t n, const void* wv, const uint8_t* a, size_t stride, float* out) {
        const auto* w = static_cast<const block_q6_K*>(wv);
        const TokenRows<block_q8_K, NT> y(a, stride);
        const int64_t nb = n / QK_K;
        const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
        // 128-bit lane index (0..3) of each int16 lane.
        const __m512i lane_of_word = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16(1), _mm_set1_epi16(0))),
            _mm256_set_m128i(_mm_set1_epi16(3), _mm_set1_epi16(2)), 1);
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t ib = 0; ib < nb; ++ib) {
            const block_q6_K& b = w[ib];
            prefetch_ahead(&b);
            const __m256i scales16 = _mm256_cvtepi8_epi16(load128(b.scales));
            const __m512i sc512 = _mm512_castsi256_si512(scales16);
            __m512i sum[NT];
            for (int t = 0; t < NT; ++t) sum[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                const __m512i ql = load512(b.ql + 64 * h);
                const __m512i qh = bcast256(b.qh + 32 * h);
#pragma GCC unroll 2
                for (int u = 0; u < 2; ++u) {
                    const int c0 = 4 * h + 2 * u;
                    const __m512i low = _mm512_and_si512(u ? _mm512_srli_epi16(ql, 4) : ql, low4);
                    // bits 2k, 2k + 1 of qh to bits 4, 5 for k = 2u (low half), 2u + 1 (high)
                    const __m512i hs = u ? _mm512_srlv_epi16(qh, halves_epi16(0, 2))
                                         : _mm512_sllv_epi16(qh, halves_epi16(4, 2));
                    const __m512i q = _mm512_or_si512(low, _mm512_and_si512(hs, bits45));
                    const __m512i scale = _mm512_permutexvar_epi16(
                        _mm512_add_epi16(lane_of_word,
                                         _mm512_set1_epi16(static_cast<short>(2 * c0))),
                        sc512);
#pragma GCC unroll 8
                    for (int t = 0; t < NT; ++t) {
                        const __m512i p =
                            _mm512_maddubs_epi16(q, load512(y.row[t][ib].qs + 32 * c0));
                        sum[t] = _mm512_dpwssd_epi32(sum[t], p, scale);
                        pin512(sum[t]);
                    }
                }
            }
            const float d = h2f(b.d);
            for (int t = 0; t < NT; ++t) {
                const block_q8_K& yb = y.row[t][ib];
                const __m256i offset = _mm256_madd_epi16(load_bsums(yb), scales16);
                const __m256i s =
                    _mm256_sub_epi32(fold_halves(sum[t]), _mm256_slli_epi32(offset, 5));
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * yb.d), _mm256_cvtepi32_ps(s), acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
    }
};

// The AVX-512 level's VecDotFn for the formats with a one-row 512-bit kernel, else nullptr.
VecDotFn x86_vec_dot_512(GGMLType wt) {
    switch (wt) {
        case GGMLType::Q4_K:
            return &vec_dot_groups<K4Row512<Dec1Q4_K>, kKGroupMax>;
        case GGMLType::Q5_K:
            return &vec_dot_groups<K4Row512<Dec1Q5_K>, kKGroupMax>;
        case GGMLType::Q6_K:
            return &vec_dot_groups<Q6KRow512, kKGroupMax>;
        default:
            return nullptr;
    }
}

VecDotRows2Fn x86_vec_dot_rows2(GGMLType wt) {
    switch (wt) {
        case GGMLType::Q4_K:
            return &vec_dot_rows2_groups<K4Rows2<Dec2Q4_K>>;
        case GGMLType::Q5_K:
            return &vec_dot_rows2_groups<K4Rows2<Dec2Q5_K>>;
        case GGMLType::Q6_K:
            return &vec_dot_rows2_groups<Q6KRows2>;
        default:
            return nullptr;
    }
}

}  // namespace
}  // namespace specula::simd
