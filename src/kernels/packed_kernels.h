// Private to kernels/: the packed Q8_0 tile kernels per level (gemm_q8_avx2.cpp,
// gemm_q8_avx512.cpp), which dispatch chooses from, and the token grouping both share.
#pragma once

#include <type_traits>

#include "kernels/repack.h"

namespace specula::simd {

PackedTileFn avx2_packed_tile();
PackedTileFn avx512_packed_tile();
PackedPairFn avx512_packed_pair();

namespace {

// Calls f(integral_constant<int, nt>) for a run-time nt in 1..N.
template <int N, class F>
__attribute__((always_inline)) inline void with_tokens(int nt, F&& f) {
    if constexpr (N == 1) {
        f(std::integral_constant<int, 1>{});
    } else if (nt == N) {
        f(std::integral_constant<int, N>{});
    } else {
        with_tokens<N - 1>(nt, f);
    }
}

// Splits ntok tokens into the fewest groups of at most kMax, of balanced sizes (9 = 5 + 4 with
// kMax 8), and calls run(integral_constant<NT>, the group's activations, its first token). A
// token's operations do not depend on its group, so the split only changes how often a tile is
// re-read.
template <int kMax, class F>
__attribute__((always_inline)) inline void token_groups(const PackedActs& a, int ntok, F&& run) {
    for (int t = 0; t < ntok;) {
        const int left = ntok - t, groups = (left + kMax - 1) / kMax;
        const int nt = (left + groups - 1) / groups;
        PackedActs at = a;
        at.q += t * a.stride;
        at.d += t * a.nb;
        at.corr += t * a.nb;
        with_tokens<kMax>(nt, [&](auto n) { run(n, at, t); });
        t += nt;
    }
}

}  // namespace

}  // namespace specula::simd
