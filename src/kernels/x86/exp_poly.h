// The e^x steps the blocked softmax shares across vector levels (kernels/attention.h's softmax:
// AVX-512 and AVX2 give the same bits): x = n ln2 + r, n rounded to nearest even, with ln2 split in
// two for an exact product, and e^r by its Taylor polynomial to degree 7 in Horner FMAs (relative
// error < 2e-8 before rounding). Written over the including level's operations (V: set1, fma,
// fnma(a, b, c) = c - a * b, mul, round: to nearest even); each level applies 2^n itself. Include
// it only from files compiled with that level's flags (internal linkage: no copy is shared).
#pragma once

namespace specula::simd {

namespace {

// r for x = n ln2 + r, given n.
template <class V>
[[gnu::always_inline]] inline typename V::Reg exp_reduce(typename V::Reg x, typename V::Reg n) {
    const typename V::Reg r = V::fnma(n, V::set1(0.693145751953125f), x);
    return V::fnma(n, V::set1(1.428606765330187045e-06f), r);
}

// n = round(x / ln2).
template <class V>
[[gnu::always_inline]] inline typename V::Reg exp_exponent(typename V::Reg x) {
    return V::round(V::mul(x, V::set1(1.44269504088896341f)));
}

// e^r for |r| <= ln2 / 2.
template <class V>
[[gnu::always_inline]] inline typename V::Reg exp_taylor7(typename V::Reg r) {
    typename V::Reg p = V::set1(1.f / 5040.f);
    for (const float c : {1.f / 720.f, 1.f / 120.f, 1.f / 24.f, 1.f / 6.f, 0.5f, 1.f, 1.f})
        p = V::fma(p, r, V::set1(c));
    return p;
}

}  // namespace

}  // namespace specula::simd
