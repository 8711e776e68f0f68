// AVX-512 VNNI tile kernel for packed Q8_0 weights (kernels/repack.h): 16 rows in the 16 lanes of
// a zmm register, up to 9 tokens per pass over the tile. Per block and token: vpdpbusd of the 8
// weight lines (unsigned q + 128) with the token's 4-byte groups broadcast, starting from
// -128 * sum(a), which gives the exact int32 dot product; then acc = fma(float(isum), d_w * d_a,
// acc), the operations of packed_tile_ref, so the results equal it bit for bit.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx512/tile512.h"
#include "kernels/isa_parts.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/token_groups.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512BW__)
#error "avx512/gemm_q8.cpp must be compiled with AVX-512 BW and VNNI enabled"
#endif

// GCC 12 flags the undefined source operand of _mm512_cvtph_ps / _mm512_cvtepi32_ps.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specula::simd {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

constexpr int kMaxTokens = 9;  // 2 x 9 accumulators, the scales and a weight line (12 spills)
// Block pairs (1088 bytes each) to prefetch ahead (measured: 3..16), for passes over 2 tokens or
// more. A 1-token pass streams each tile's contiguous bytes at the memory's pace with the hardware
// prefetchers alone, and the prefetch instructions only slowed it (measured on Zen 5, 2 threads,
// the ~1B Q8_0 target's 1-token pass, medians of 8-10 runs in ABBA order: none 6-8% faster than 8
// pairs ahead, 15% than 4, 22% than 16). From 5 tokens on they pay (none: 13% slower).
constexpr int kAheadPairs = 8;

// Where tile_tokens finds token t's block b: the rows (a pointer per token, kept in registers or
// spilled) ...
struct RowActs {
    const uint8_t* q;  // token 0's block 0 quants (after its fp16 scale)
    size_t stride;
    const int32_t* c;
    const float* dd;
    int64_t nb;
    explicit RowActs(const PackedActs& a)
        : q(a.q + 2), stride(a.stride), c(a.corr), dd(a.d), nb(a.nb) {}
    const uint8_t* quants(int64_t b, int t) const { return q + b * 34 + t * stride; }
    int32_t corr(int64_t b, int t) const { return c[t * nb + b]; }
    float d(int64_t b, int t) const { return dd[t * nb + b]; }
};

// ... or the block records (PackedActs::records: one pointer, fixed offsets). On Zen 4 the nine
// row pointers of a 9-token pass left the kernel short of registers: it parked them in vector
// registers and moved them back every block (25 vmovq per block of 72 vpdpbusd).
template <int NT>
struct RecordActs {
    const uint8_t* rec;
    static constexpr size_t kBytes = block_record_bytes(NT);
    const uint8_t* quants(int64_t b, int t) const { return rec + b * kBytes + 8 * NT + 32 * t; }
    int32_t corr(int64_t b, int t) const {
        int32_t v;
        std::memcpy(&v, rec + b * kBytes + 4 * t, 4);
        return v;
    }
    float d(int64_t b, int t) const {
        float v;
        std::memcpy(&v, rec + b * kBytes + 4 * (NT + t), 4);
        return v;
    }
};

// Rows lo..hi-1 of a tile against NT tokens. Per block the 8 weight lines are loaded once and
// each meets every token (line-major order, so the tokens' int32 chains interleave); one or two
// tokens get two chains each, so their chains are half as long.
template <int NT, class A>
void tile_tokens(const uint8_t* tile, const A& acts, int64_t nb, int lo, int hi, float* y,
                 int64_t ldy) {
    constexpr int CH = NT <= 4 ? 2 : 1;
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* pair = tile + (b >> 1) * 1088;
        if (NT > 1 && (b & 1) == 0) {  // one token: see kAheadPairs
            const char* pf = reinterpret_cast<const char*>(pair) + kAheadPairs * 1088;
            for (int l = 0; l < 17; ++l) prefetch_weights<NT>(pf + 64 * l);
        }
        const auto* wq = reinterpret_cast<const __m512i*>(pair + 64 + (b & 1) * 512);
        __m512i s[CH][NT];
        for (int t = 0; t < NT; ++t) {
            s[0][t] = _mm512_set1_epi32(acts.corr(b, t));
            if constexpr (CH == 2) s[1][t] = _mm512_setzero_si512();
        }
        for (int g = 0; g < 8; ++g) {
            const __m512i w = _mm512_load_si512(wq + g);
            for (int t = 0; t < NT; ++t) {
                s[g % CH][t] = dpbusd_bcast(s[g % CH][t], w, acts.quants(b, t) + 4 * g);
            }
        }
        const __m512 dw = _mm512_cvtph_ps(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(pair + (b & 1) * 32)));
        for (int t = 0; t < NT; ++t) {
            const __m512i st = CH == 2 ? _mm512_add_epi32(s[0][t], s[CH - 1][t]) : s[0][t];
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(acts.d(b, t)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(st), sc, acc[t]);
        }
    }
    store_rows<NT>(acc, lo, hi, y, ldy);
}

void tile_avx512(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
                 int64_t ldy) {
    static_assert(kBlockRecordTokens <= kMaxTokens);
    if (a.records && ntok == a.record_tokens) {  // the same operations, one group
        return with_count<kBlockRecordTokens>(ntok, [&](auto n) {
            tile_tokens<n()>(tile, RecordActs<n()>{a.records}, a.nb, lo, hi, y, ldy);
        });
    }
    token_groups<kMaxTokens>(a, ntok, [&](auto n, const PackedActs& at, int t) {
        tile_tokens<n()>(tile, RowActs(at), at.nb, lo, hi, y + t * ldy, ldy);
    });
}

constexpr int kMaxPairTokens = 6;  // 2 x 2 x 6 accumulators, 2 weight lines, the scales

// Two whole tiles (tile and tile + tb: 32 rows) against NT tokens. Each token's 4 activation
// bytes are broadcast into a register once and meet both tiles' weight lines, so a vpdpbusd
// costs half a load rather than one (measured on Zen 5, one core: 7.5 G vpdpbusd/s against 5.3
// with the broadcast from memory). Per (row, token) the operations are tile_tokens' own.
template <int NT>
void pair_tokens(const uint8_t* tile, size_t tb, const PackedActs& a, float* y, int64_t ldy) {
    __m512 acc[2][NT];
    for (int t = 0; t < NT; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    const size_t stride = a.stride;
    const uint8_t* q0 = a.q + 2;
    for (int64_t b = 0; b < a.nb; ++b) {
        const uint8_t* p0 = tile + (b >> 1) * 1088;
        const uint8_t* p1 = p0 + tb;
        if ((b & 1) == 0) {
            const char* f0 = reinterpret_cast<const char*>(p0) + kAheadPairs * 1088;
            const char* f1 = reinterpret_cast<const char*>(p1) + kAheadPairs * 1088;
            for (int l = 0; l < 17; ++l) {
                prefetch_weights<NT>(f0 + 64 * l);
                prefetch_weights<NT>(f1 + 64 * l);
            }
        }
        const size_t half = 64 + (b & 1) * 512;
        const auto* w0 = reinterpret_cast<const __m512i*>(p0 + half);
        const auto* w1 = reinterpret_cast<const __m512i*>(p1 + half);
        const uint8_t* qb = q0 + b * 34;
        __m512i s[2][NT];
        for (int t = 0; t < NT; ++t) s[0][t] = s[1][t] = _mm512_set1_epi32(a.corr[t * a.nb + b]);
        for (int g = 0; g < 8; ++g) {
            const __m512i l0 = _mm512_load_si512(w0 + g), l1 = _mm512_load_si512(w1 + g);
            for (int t = 0; t < NT; ++t) {
                int32_t v;
                std::memcpy(&v, qb + t * stride + 4 * g, 4);
                const __m512i x = _mm512_set1_epi32(v);
                s[0][t] = _mm512_dpbusd_epi32(s[0][t], l0, x);
                s[1][t] = _mm512_dpbusd_epi32(s[1][t], l1, x);
            }
        }
        const size_t sc = (b & 1) * 32;
        const __m512 d0 =
            _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p0 + sc)));
        const __m512 d1 =
            _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p1 + sc)));
        for (int t = 0; t < NT; ++t) {
            const __m512 da = _mm512_set1_ps(a.d[t * a.nb + b]);
            acc[0][t] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[0][t]), _mm512_mul_ps(d0, da), acc[0][t]);
            acc[1][t] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[1][t]), _mm512_mul_ps(d1, da), acc[1][t]);
        }
    }
    for (int t = 0; t < NT; ++t) {
        _mm512_storeu_ps(y + t * ldy, acc[0][t]);
        _mm512_storeu_ps(y + t * ldy + 16, acc[1][t]);
    }
}

void pair_avx512(const uint8_t* tile, size_t tb, const PackedActs& a, int ntok, float* y,
                 int64_t ldy) {
    token_groups<kMaxPairTokens>(a, ntok, [&](auto n, const PackedActs& at, int t) {
        pair_tokens<n()>(tile, tb, at, y + t * ldy, ldy);
    });
}

}  // namespace

}  // namespace specula::simd

namespace specula::avx512 {

namespace {

// The pair kernel pays where a pass is bound by arithmetic (prompts); up to 9 tokens a pass over
// a 2048-column Q8_0 matrix is bound by memory and the single-tile kernel, which meets all 9
// tokens in one sweep over the weights, was faster (measured on Zen 5, 5632 x 2048, 2 threads,
// 4 paired runs: 5 tokens 315 against 354 us, 9 tokens 329 against 408 us).
constexpr int kPairMinTokens = 10;

}  // namespace

void add_gemm_q8(KernelTable& t) {
    t.add(GGMLType::Q8_0, Layout::Packed, Isa::AVX512, TokenClass::Any).tile = &simd::tile_avx512;
    Kernel& m = t.add(GGMLType::Q8_0, Layout::Packed, Isa::AVX512, TokenClass::Many);
    m.pair = &simd::pair_avx512;
    m.min_tokens = kPairMinTokens;
}

}  // namespace specula::avx512
