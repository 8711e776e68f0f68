// The x86 row-layout dot-product kernels' shared helpers (x86/dot_rows.h has the kernels' entry
// points; x86/dot_legacy.h and x86/dot_kquants.h the kernels). The kernels are written once with
// AVX2 intrinsics and compiled twice: by
// kernels/avx2/dot.cpp (-mavx2 -mfma -mf16c) and by kernels/avx512/dot.cpp (adds AVX-512
// F/BW/VL/DQ/VNNI/BF16). Everything here has internal linkage, so the two copies never meet at link
// time, and it calls no inline function of a shared header (the linker could otherwise pick the
// copy compiled with wider instructions for a scalar caller); fp16 scales are converted with the
// F16C intrinsic instead of kernels/layout/fp16.h.
//
// One weight row meets a group of tokens at a time (balanced groups, vec_dot_groups: up to 4 for
// the generic K-quant loop, 5 for the 32-element formats, 8 for Q4_K /
// Q5_K / Q6_K): every weight block is decoded once and folded into each token's own accumulators. A
// token's accumulators see the same operations in the same order whatever the group size, so out[t]
// is bit-identical for any ntok (batch invariance). Integer parts are exact; only the float
// accumulation order differs from the scalar reference. Groups of 2+ tokens take cheaper routes to
// the same values: the signed 32-element formats take the tokens' scales as floats converted once
// per matmul (x86_vec_dot_q8) or convert them together, and Q4_K / Q5_K / Q6_K decode one piece of
// a super-block at a time into every token's int32 sum (keeping the decoded weights in registers).
//
// With AVX512-VNNI the only change is that byte dot products use vpdpbusd (256-bit, EVEX) instead
// of vpmaddubsw + vpmaddwd; both give the same int32 lanes, so the two builds agree bit for bit
// (and the compiler gets 32 vector registers). The AVX-512 build replaces Q4_K / Q5_K / Q6_K with
// 512-bit kernels (one row, and two rows at once for matmul) that again give the same bits
// (kernels/avx512/dot_kquants512.h).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/kernel_types.h"
#include "kernels/layout/blocks.h"
#include "kernels/x86/hsum.h"
#include "kernels/x86/token_groups.h"

namespace specula::simd {
namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

SPECULA_INLINE float h2f(fp16_t h) {
    return _cvtsh_ss(h);
}

SPECULA_INLINE __m256i load256(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
SPECULA_INLINE __m128i load128(const void* p) {
    return _mm_loadu_si128(static_cast<const __m128i*>(p));
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

// Token T's lane of a register holding a group's per-token scales (lanes 0..3, in both 128-bit
// halves) in all 8 lanes.
template <int T>
SPECULA_INLINE __m256 splat_token(__m256 s) {
    return _mm256_permute_ps(s, T * 0x55);
}

// The VecDotFn of a kernel K with K::run<NT> for NT = 1..kMax tokens per pass over a row.
template <class K, int kMax>
void vec_dot_groups(int64_t n, const void* w, const void* a, size_t stride, int ntok, float* out) {
    const auto* ab = static_cast<const uint8_t*>(a);
    balanced_groups<kMax>(ntok, [&](auto nt, int t) {
        K::template run<nt()>(n, w, ab + t * stride, stride, out + t);
    });
}

// Weight rows are streamed from memory: while a block is being used, the block kPrefetchBytes
// further on (the rest of this row, then the next rows that matmul hands over) is requested. The
// hardware prefetchers alone leave a single-token pass well short of the machine's read
// bandwidth; 2 KiB ahead (about one row of 2048 Q8_0 weights) measured best on a Zen 3, 1 thread.
constexpr size_t kPrefetchBytes = 2048;
template <class Block>
SPECULA_INLINE void prefetch_ahead(const Block* b) {
    const char* p = reinterpret_cast<const char*>(b) + kPrefetchBytes;
    for (size_t o = 0; o < sizeof(Block); o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

}  // namespace
}  // namespace specula::simd
