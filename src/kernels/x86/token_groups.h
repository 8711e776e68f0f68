// Private to the ISA kernels (kernels/<isa>/): the one compile-time count helper and the one
// token-group split every SIMD kernel uses. A kernel's token count must be a compile-time constant
// so that its per-token accumulators live in registers; with_count turns a run-time count into
// one, and balanced_groups splits a pass's tokens into the fewest groups of at most kMax of
// balanced sizes (9 = 5 + 4 with kMax 5 or 8). A token's operations never depend on its group, so
// the split only changes how often the weights are re-read, never a result.
//
// Like every kernels/x86/ header it has internal linkage (an anonymous namespace) and is included
// by the ISA translation units, so each ISA's copy is compiled with that ISA's flags and no copy
// is shared across ISAs at link time.
#pragma once

#include <type_traits>

#include "kernels/kernel_types.h"
#include "kernels/layout/repack_k.h"  // kq_acts_from

#ifndef SPECULA_INLINE
#define SPECULA_INLINE __attribute__((always_inline)) inline
#endif

namespace specula::simd {

namespace {

// Calls f(integral_constant<int, k>) for a run-time k in 1..N.
template <int N, class F>
SPECULA_INLINE void with_count(int k, F&& f) {
    if constexpr (N == 1) {
        f(std::integral_constant<int, 1>{});
    } else if (k == N) {
        f(std::integral_constant<int, N>{});
    } else {
        with_count<N - 1>(k, f);
    }
}

// The size of the next group when `left` tokens remain: the fewest groups of at most kMax, of
// balanced sizes.
template <int kMax>
constexpr int next_group(int left) {
    const int groups = (left + kMax - 1) / kMax;
    return (left + groups - 1) / groups;
}

// Calls run(integral_constant<NT>, first token) for each group of a balanced split of ntok tokens
// into groups of at most kMax.
template <int kMax, class F>
SPECULA_INLINE void balanced_groups(int ntok, F&& run) {
    for (int t = 0; t < ntok;) {
        const int nt = next_group<kMax>(ntok - t);
        with_count<kMax>(nt, [&](auto n) { run(n, t); });
        t += nt;
    }
}

// The same for a packed kernel: run(integral_constant<NT>, the group's activations, its first
// token), with Q8_0 activations (kernels/repack.h) ...
template <int kMax, class F>
SPECULA_INLINE void token_groups(const PackedActs& a, int ntok, F&& run) {
    for (int t = 0; t < ntok;) {
        const int nt = next_group<kMax>(ntok - t);
        PackedActs at = a;
        at.q += t * a.stride;
        at.d += t * a.nb;
        at.corr += t * a.nb;
        with_count<kMax>(nt, [&](auto n) { run(n, at, t); });
        t += nt;
    }
}

// ... or with the packed K-quants' (kq_prepare_acts, kernels/layout/repack_k.h).
template <int kMax, class F>
SPECULA_INLINE void kq_token_groups(const PackedActs& a, int ntok, F&& run) {
    for (int t = 0; t < ntok;) {
        const int nt = next_group<kMax>(ntok - t);
        const PackedActs at = kq_acts_from(a, t);
        with_count<kMax>(nt, [&](auto n) { run(n, at, t); });
        t += nt;
    }
}

}  // namespace

}  // namespace specula::simd
