// AVX-512 VNNI tile kernels for packed Q4_K / Q6_K weights (kernels/layout/repack_k.h): the 16 rows
// of a tile in the 16 int32 lanes of a zmm register, up to 10 tokens per pass over the tile. Each
// 64-byte quant line is loaded and decoded once per pass and meets every token of the group by
// vpdpbusd with the token's 4 activation bytes broadcast; each sub-block (Q4_K) or group (Q6_K)
// sum is scaled by its integer scale into the exact int32 isum of repack_k.h (two builds: by
// vpdpwssd on the sum's int16 halves, Isa::AVX512, or by vpmulld on the whole sum,
// Isa::AVX512Mulld for AMD), then the float steps of kq_tile_ref_*, so the results equal the
// scalar reference bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/avx512/q4k_steps.h"
#include "kernels/avx512/tile512.h"
#include "kernels/isa_parts.h"
#include "kernels/layout/blocks.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/token_groups.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512BW__)
#error "avx512/gemm_kquants.cpp must be compiled with AVX-512 BW and VNNI enabled"
#endif

// GCC 12 flags the undefined source operand of _mm512_cvtph_ps / _mm512_cvtepi32_ps.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specula::simd {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

constexpr int kMaxTokens = 10;  // measured 8, 10, 12 (hot, one thread): 10 is best for both types
// How far ahead of the record in use its lines are requested, for a pass over NT tokens: a pass
// over several tokens computes long enough per record that 4 KiB ahead arrive late (measured,
// 5632 x 2048 from memory, 2 threads, 9 tokens, medians of 5 paired runs: 8 KiB ahead Q4_K -6%,
// Q6_K -12%); one or two tokens keep 4 KiB (8 KiB was no better there).
template <int NT>
constexpr size_t kAheadBytes = NT >= 5 ? 8192 : 4096;

SPECULA_INLINE __m512i line(const uint8_t* sb, size_t off) {
    return _mm512_load_si512(sb + off);
}
// Part `part` of `parts` of the lines kAheadBytes past record sb (of `bytes`): a record's
// requests spread over its loop, not issued in one burst that waits for fill buffers (a profile
// of an 8B-shaped Q4_K_M file's 9-token pass had 43% of the Q4_K kernel's samples on the burst's
// prefetches; spread: a cold 5632 x 2048 matrix's 9-token pass 20-25% faster, Q4_K and Q6_K, on
// an Intel Xeon, 2 threads, three paired runs).
template <int NT>
SPECULA_INLINE void prefetch_part(const uint8_t* sb, size_t bytes, int part, int parts) {
    const size_t lines = (bytes + 63) / 64, per = (lines + parts - 1) / parts;
    const size_t end = std::min(lines, per * (part + 1));
    for (size_t l = per * part; l < end; ++l) {
        prefetch_weights<NT>(reinterpret_cast<const char*>(sb) + kAheadBytes<NT> + 64 * l);
    }
}

// Sub-block s of a Q4_K super-block into isum, its 32 products of a 4-bit weight and an int8 in
// one of two ways:
//  - Mulld (the policy's kq_mulld: AMD, where vpmulld costs what vpdpwssd does): the whole dot,
//    |.| <= 32 * 15 * 127 (17 bits), in int32, then isum += dot * scale by one vpmulld per token
//    (measured on Zen 4: vpmulld, vpdpwssd and vpdpbusd each one per cycle, all on the same two
//    pipes; the add and the decode's and / shift go to the other two). Two tokens keep two chains
//    each, added (a chain of 8 dependent vpdpbusd would wait on their latency); one token takes
//    the other build (tile_q4_K).
//  - else (Intel, where vpmulld is two uops on port 0): the sum in two halves, the low nibbles'
//    and the high nibbles': 16 products each, |half| <= 16 * 15 * 127 = 30480, an int16
//    sign-extended in its lane, so one vpdpwssd with the scale (its high half zero) adds half *
//    scale to isum exactly. (One sum of 32 and a vpmulld: the 5- to 16-token kernels took ~10%
//    longer there, measured hot on an Intel Xeon.)
template <int NT, bool Mulld>
SPECULA_INLINE void q4k_sub(const uint8_t* sb, const ActsAt& x, int s, __m512i* isum) {
    constexpr int CH = !Mulld || NT <= 2 ? 2 : 1;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i dot[CH][NT];
    for (int t = 0; t < NT; ++t) {
        for (int c = 0; c < CH; ++c) dot[c][t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int g = 4 * s; g < 4 * s + 4; ++g) {
        const __m512i raw = line(sb, 320 + 64 * g);
        const __m512i wl = _mm512_and_si512(raw, low4);
        const __m512i wh = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
        for (int t = 0; t < NT; ++t) {
            const int8_t* q = x.q + 256 * t + 8 * g;
            dot[0][t] = dpbusd_bcast(dot[0][t], wl, q);
            dot[CH - 1][t] = dpbusd_bcast(dot[CH - 1][t], wh, q + 4);
        }
    }
    const __m512i sc =
        _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 64 + 16 * s)));
    for (int t = 0; t < NT; ++t) {
        if constexpr (Mulld) {
            const __m512i d = CH == 2 ? _mm512_add_epi32(dot[0][t], dot[CH - 1][t]) : dot[0][t];
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(d, sc));
        } else {
            isum[t] = _mm512_dpwssd_epi32(isum[t], dot[0][t], sc);
            isum[t] = _mm512_dpwssd_epi32(isum[t], dot[1][t], sc);
        }
    }
}

template <int NT, bool Mulld>
void q4k_tokens(const uint8_t* tile, const PackedActs& a, int lo, int hi, float* y, int64_t ldy) {
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < a.nb; ++b) {
        const uint8_t* sb = tile + b * kQ4KSuperBytes;
        const ActsAt x(a, b);
        q4k_mins(sb, x, NT, acc);
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 1
        for (int s = 0; s < 8; ++s) {
            prefetch_part<NT>(sb, kQ4KSuperBytes, s, 8);
            q4k_sub<NT, Mulld>(sb, x, s, isum);
        }
        q4k_finish(sb, x, NT, isum, acc);
    }
    store_rows<NT>(acc, lo, hi, y, ldy);
}

// Group g of a Q6_K super-block (its 4 decoded lines q) into isum: sum (u - 32) * x over 16
// elements, |.| <= 16 * 32 * 127 (17 bits), scaled by the group's int8 scale, in one of two ways:
//  - Mulld (AMD, as q4k_sub): the whole dot from -32 * bsum_g in int32, isum += dot * scale by
//    one vpmulld per token; one or two tokens keep two chains, added.
//  - else: two halves of 8 elements, each from -32 * the sum of its 8 quants, an int16
//    sign-extended in its lane (repack_k.h), so one vpdpwssd with the scale (an int16, its high
//    half zero) adds half * scale to isum exactly. (One dot of 16 and a vpmulld, two uops on port
//    0, and an add took 6-20% longer at 1 to 10 tokens, hot on an Intel Xeon, the two alternated
//    in one process.)
template <int NT, bool Mulld>
SPECULA_INLINE void q6k_group(const uint8_t* sb, const ActsAt& x, int g, const __m512i* q,
                              __m512i* isum) {
    constexpr bool kHalves = !Mulld || NT <= 2;
    __m512i dot[2][NT];
    for (int t = 0; t < NT; ++t) {
        const int32_t* c = x.corr + kKqCorr * t;
        if constexpr (Mulld) {
            dot[0][t] = _mm512_set1_epi32(c[g]);
            dot[1][t] = _mm512_setzero_si512();
        } else {
            dot[0][t] = _mm512_set1_epi32(c[kKqQ6Halves + 2 * g]);
            dot[1][t] = _mm512_set1_epi32(c[kKqQ6Halves + 2 * g + 1]);
        }
    }
    for (int k = 0; k < 4; ++k) {
        const int h = kHalves ? k >> 1 : 0;
        for (int t = 0; t < NT; ++t) {
            dot[h][t] = dpbusd_bcast(dot[h][t], q[k], x.q + 256 * t + 16 * g + 4 * k);
        }
    }
    const __m128i sc8 = _mm_load_si128(reinterpret_cast<const __m128i*>(sb + 64 + 16 * g));
    if constexpr (Mulld) {
        const __m512i sc = _mm512_cvtepi8_epi32(sc8);
        for (int t = 0; t < NT; ++t) {
            const __m512i d = kHalves ? _mm512_add_epi32(dot[0][t], dot[1][t]) : dot[0][t];
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(d, sc));
        }
    } else {
        const __m512i sc = _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(sc8));
        for (int t = 0; t < NT; ++t) {
            isum[t] = _mm512_dpwssd_epi32(isum[t], dot[0][t], sc);
            isum[t] = _mm512_dpwssd_epi32(isum[t], dot[1][t], sc);
        }
    }
}

template <int NT, bool Mulld>
void q6k_tokens(const uint8_t* tile, const PackedActs& a, int lo, int hi, float* y, int64_t ldy) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < a.nb; ++b) {
        const uint8_t* sb = tile + b * kQ6KSuperBytes;
        const ActsAt x(a, b);
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 1
        for (int g = 0; g < 16; ++g) {
            prefetch_part<NT>(sb, kQ6KSuperBytes, g, 16);
            const __m512i l0 = line(sb, 320 + 128 * g), l1 = line(sb, 384 + 128 * g);
            const __m512i h = line(sb, 2368 + 64 * g);
            const __m512i q[4] = {
                _mm512_or_si512(_mm512_and_si512(l0, low4),
                                _mm512_and_si512(_mm512_slli_epi16(h, 4), bits45)),
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), low4),
                                _mm512_and_si512(_mm512_slli_epi16(h, 2), bits45)),
                _mm512_or_si512(_mm512_and_si512(l1, low4), _mm512_and_si512(h, bits45)),
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), low4),
                                _mm512_and_si512(_mm512_srli_epi16(h, 2), bits45))};
            q6k_group<NT, Mulld>(sb, x, g, q, isum);
        }
        const __m512 dw = fp16x16(sb);
        for (int t = 0; t < NT; ++t) {
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(x.d[t])), acc[t]);
        }
    }
    store_rows<NT>(acc, lo, hi, y, ldy);
}

template <bool Mulld>
void tile_q4_K(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
               int64_t ldy) {
    kq_token_groups<kMaxTokens>(a, ntok, [&](auto n, const PackedActs& at, int t) {
        // One token keeps the int16 halves: its single chain waits on vpmulld's latency (hot,
        // one core, Zen 4: 1 token 9% slower by vpmulld, 2 tokens 2% faster, 9 tokens 8%).
        q4k_tokens<n(), Mulld && (n() > 1)>(tile, at, lo, hi, y + t * ldy, ldy);
    });
}

template <bool Mulld>
void tile_q6_K(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
               int64_t ldy) {
    kq_token_groups<kMaxTokens>(a, ntok, [&](auto n, const PackedActs& at, int t) {
        q6k_tokens<n(), Mulld>(tile, at, lo, hi, y + t * ldy, ldy);
    });
}

}  // namespace

}  // namespace specula::simd

namespace specula::avx512 {

void add_gemm_kquants(KernelTable& t) {
    t.add(GGMLType::Q4_K, Layout::Packed, Isa::AVX512, TokenClass::Any).tile =
        &simd::tile_q4_K<false>;
    t.add(GGMLType::Q6_K, Layout::Packed, Isa::AVX512, TokenClass::Any).tile =
        &simd::tile_q6_K<false>;
    t.add(GGMLType::Q4_K, Layout::Packed, Isa::AVX512Mulld, TokenClass::Any).tile =
        &simd::tile_q4_K<true>;
    t.add(GGMLType::Q6_K, Layout::Packed, Isa::AVX512Mulld, TokenClass::Any).tile =
        &simd::tile_q6_K<true>;
}

}  // namespace specula::avx512
