// How the packed tile and panel kernels ask for the weight lines they stream ahead of their use:
// the one place that chooses their cache level. A pass over 2 tokens or more asks for them into L2
// (prefetcht1), not L1 (prefetcht0): L1 (32 KiB on Zen 4) also holds the tokens' activations, which
// every weight line meets, and lines pulled into it a few KiB ahead evict them, so the kernel's
// loads of the activations go to L2 and its arithmetic stops overlapping the memory stream.
// Measured on Zen 4 (AMD EPYC, 2 threads): packed Q8_0 5632 x 2048, 9 tokens 709-759 -> 408-432 us
// and 5 tokens 528-572 -> 276-389 (1 token 280-400 either way); an 8B-shaped Q8_0 file's 9-token
// pass 477-483 -> 261-271 ms, its Q4_K_M's 5-token pass 182-195 -> 144-148 ms; 512-token prompts,
// F16 and the AVX2 builds (SPECULA_SIMD=avx2) unchanged or a few percent faster, within noise. A
// 1-token pass keeps prefetcht0 (one row of activations leaves L1 room; no measured gain from L2).
// The row-layout dots (x86/dot_common.h's prefetch_ahead) keep prefetcht0 at every token count:
// L2 measured slower there (5 tokens: Q8_0 736-813 -> 910-916 us, Q4_K 491-505 -> 580-640).
#pragma once

#include <immintrin.h>

namespace specula::simd {

template <int NT>
__attribute__((always_inline)) inline void prefetch_weights(const void* p) {
    _mm_prefetch(static_cast<const char*>(p), NT == 1 ? _MM_HINT_T0 : _MM_HINT_T1);
}

}  // namespace specula::simd
