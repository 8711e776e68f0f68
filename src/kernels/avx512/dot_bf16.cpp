// AVX-512 BF16 panel kernel for packed BF16 weights (kernels/layout/repack_float.h's panels):
// vdpbf16ps multiplies 16 rows x 2 columns of weights with a token's 2 activations and adds both
// products to the row's float chain, 32 multiply-adds per instruction where the float kernels do 16
// (measured on Zen 5, one core: 7.7 G vdpbf16ps/s against 7.2 G vfmadd231ps/s, so twice the
// multiply-adds, and a prompt over BF16 weights is bound by them).
//
// The activations of a BF16 matrix are BF16 already (its vec_dot_type, rounded as llama.cpp
// does), so this level keeps them as they are, two columns per 32-bit word: avx512_bf16_widen
// writes chunk word [j * m + t] = columns 2j, 2j + 1 of token t (the odd column 0 past the end)
// where the float kernels have floats. A panel line holds columns 2j and 2j + 1 of the 16 rows
// one after the other; one vpermw per line puts each row's pair in its 32-bit lane.
//
// Operations of one output: the columns in blocks of kFloatBlock, as the float kernels; within a
// block, one chain over the column pairs in order, each pair one vdpbf16ps (both products exact
// in float, added with round-to-nearest, inputs and outputs denormal-flushed, as the instruction
// defines). That depends on nothing but the row and the token, so every batch size, token
// grouping and thread split gives the same bits at this level (batch invariance). Against the
// scalar and AVX2 levels (one rounding per column, no flushing) results agree within rounding.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/isa_parts.h"
#include "kernels/layout/repack_float.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/token_groups.h"  // with_count

#if !defined(__AVX512BF16__) || !defined(__AVX512BW__)
#error "avx512/dot_bf16.cpp must be compiled with AVX-512 BW and BF16 enabled"
#endif

namespace specula::simd {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

constexpr int kRows = 16;  // rows per panel (kPackRows)
constexpr int kAccs = 16;  // chains to aim for (NB blocks side by side for few tokens)

// Lane i of the vpermw index: word i of the operand is row i / 2's column 2j + i % 2, which the
// line holds at (i % 2) * 16 + i / 2.
SPECULA_INLINE __m512i interleave_index() {
    alignas(64) uint16_t idx[32];
    for (int i = 0; i < 32; ++i) idx[i] = static_cast<uint16_t>((i % 2) * kRows + i / 2);
    return _mm512_load_si512(idx);
}

// NB blocks of len columns from column k0 (even; block b at k0 + b * len, len even when NB > 1)
// for G tokens; adds each block's chain to tot[t][row] in block order. Token t's pair j at
// x[j * xs + t].
template <int G, int NB>
SPECULA_INLINE void pair_blocks(const uint16_t* w, const uint32_t* x, int64_t xs, int64_t k0,
                                int64_t len, float (*tot)[kRows]) {
    const __m512i perm = interleave_index();
    __m512 acc[NB][G];
    for (int b = 0; b < NB; ++b) {
        for (int t = 0; t < G; ++t) acc[b][t] = _mm512_setzero_ps();
    }
    auto step = [&](int64_t c, bool half) {  // the pair at column c of each block
        for (int b = 0; b < NB; ++b) {
            const int64_t cb = c + b * len;
            const __m512i line = half ? _mm512_maskz_loadu_epi16(0xFFFF, w + cb * kRows)
                                      : _mm512_loadu_si512(w + cb * kRows);
            const auto wv = reinterpret_cast<__m512bh>(_mm512_permutexvar_epi16(perm, line));
            const uint32_t* xp = x + (cb / 2) * xs;
            for (int t = 0; t < G; ++t) {
                const auto xv =
                    reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(xp[t])));
                acc[b][t] = _mm512_dpbf16_ps(acc[b][t], wv, xv);
            }
        }
    };
    // As the float panels: the lines of the next NB blocks, NB per line used, one stream ahead.
    const char* next = reinterpret_cast<const char*>(w + (k0 + NB * len) * kRows);
    const int64_t pairs = len / 2;
    for (int64_t j = 0; j < pairs; ++j) {
        for (int b = 0; b < NB; ++b) prefetch_weights<G>(next + (j * NB + b) * 64);
        step(k0 + 2 * j, false);
    }
    if (len % 2) step(k0 + len - 1, true);  // the row's last column, alone (NB == 1)
    for (int b = 0; b < NB; ++b) {
        for (int t = 0; t < G; ++t) {
            _mm512_storeu_ps(tot[t], _mm512_add_ps(_mm512_loadu_ps(tot[t]), acc[b][t]));
        }
    }
}

constexpr int blocks_for(int g) {
    const int nb = kAccs / g;
    return nb >= 4 ? 4 : nb >= 2 ? 2 : 1;
}

// All columns of the panel for G tokens.
template <int G>
__attribute__((noinline)) void panel_pairs(const uint16_t* w, const uint32_t* x, int64_t xs,
                                           int64_t n, float (*tot)[kRows]) {
    constexpr int NB = blocks_for(G);
    const int64_t full = n / kFloatBlock * kFloatBlock;
    int64_t k = 0;
    for (; k + NB * kFloatBlock <= full; k += NB * kFloatBlock) {
        pair_blocks<G, NB>(w, x, xs, k, kFloatBlock, tot);
    }
    if constexpr (NB > 1) {  // the last whole blocks side by side too
        const int rest = static_cast<int>((full - k) / kFloatBlock);
        if (rest > 0) {
            with_count<NB - 1>(rest,
                               [&](auto r) { pair_blocks<G, r()>(w, x, xs, k, kFloatBlock, tot); });
            k = full;
        }
    }
    if (k < n) pair_blocks<G, 1>(w, x, xs, k, n - k, tot);
}

// The PackedTileFn: rows lo .. hi-1 of the panel for ntok <= kFloatChunk tokens (one chunk), all
// of them one group (16 chains for 16 tokens; the chunk's pairs for a block stay in L1).
void bf16_panel_tile(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
                     int64_t ldy) {
    const int64_t n = static_cast<int64_t>(a.stride / sizeof(float));
    const auto* w = reinterpret_cast<const uint16_t*>(tile);
    const auto* x = reinterpret_cast<const uint32_t*>(a.q);
    alignas(64) float tot[kFloatChunk][kRows];
    const int nc = std::min(ntok, kFloatChunk);
    for (int t = 0; t < nc; ++t) {
        for (int r = 0; r < kRows; ++r) tot[t][r] = 0.0f;
    }
    with_count<kFloatChunk>(nc, [&](auto g) { panel_pairs<g()>(w, x, nc, n, tot); });
    for (int t = 0; t < nc; ++t) {
        for (int r = lo; r < hi; ++r) y[t * ldy + (r - lo)] = tot[t][r];
    }
}

// One token's BF16 activations src[0 .. n) as pairs: word j of the token at dst[j * m].
void bf16_pairs(const uint16_t* src, int64_t n, float* dst, int64_t m) {
    auto* out = reinterpret_cast<uint32_t*>(dst);
    const int64_t pairs = n / 2;
    for (int64_t j = 0; j < pairs; ++j) {
        out[j * m] = static_cast<uint32_t>(src[2 * j]) | static_cast<uint32_t>(src[2 * j + 1])
                                                             << 16;
    }
    if (n % 2) out[pairs * m] = src[n - 1];
}

}  // namespace

}  // namespace specula::simd

namespace specula::avx512 {

void add_dot_bf16(KernelTable& t) {
    Kernel& k = t.add(GGMLType::BF16, Layout::Packed, Isa::AVX512BF16Dot, TokenClass::Any);
    k.tile = &simd::bf16_panel_tile;
    k.widen = &simd::bf16_pairs;
}

}  // namespace specula::avx512
