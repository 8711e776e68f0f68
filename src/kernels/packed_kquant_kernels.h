// Private to kernels/: the packed Q4_K / Q6_K tile kernels per level (gemm_kquants_avx2.cpp,
// gemm_kquants_avxvnni.cpp, gemm_kquants_avx512.cpp), which kq_packed_tile_kernel (repack_k.cpp)
// chooses from, and the token grouping they share.
#pragma once

#include "kernels/packed_kernels.h"  // with_tokens
#include "kernels/repack_k.h"

namespace specula::simd {

PackedTileFn avx2_kq_packed_tile(GGMLType t);
PackedTileFn avxvnni_kq_packed_tile(GGMLType t);  // AVX2 + AVX-VNNI (the same bits)
PackedTileFn avx512_kq_packed_tile(GGMLType t);

namespace {

// Splits ntok tokens into the fewest groups of at most kMax, of balanced sizes (9 = 5 + 4 with
// kMax 8), and calls run(integral_constant<NT>, the group's activations, its first token). A
// token's operations do not depend on its group, so the split only changes how often a tile is
// re-read.
template <int kMax, class F>
__attribute__((always_inline)) inline void kq_token_groups(const PackedActs& a, int ntok, F&& run) {
    for (int t = 0; t < ntok;) {
        const int left = ntok - t, groups = (left + kMax - 1) / kMax;
        const int nt = (left + groups - 1) / groups;
        const PackedActs at = kq_acts_from(a, t);
        with_tokens<kMax>(nt, [&](auto n) { run(n, at, t); });
        t += nt;
    }
}

}  // namespace

}  // namespace specula::simd
