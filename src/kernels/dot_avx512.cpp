// AVX-512 build (F/BW/VL/DQ/VNNI/BF16) of the x86 dot-product kernels (kernels/dot_x86_impl.h):
// the same kernels as the AVX2 build with VNNI byte dot products and 32 vector registers, giving
// bit-identical results, except Q4_K / Q5_K / Q6_K, which get 512-bit kernels (one row, and two
// rows at once for matmul: kernels/dot_x86_kquants512.inc) that give the same bits again. The
// float types (F32, F16, BF16) have their own 512-bit tile kernels instead (dot_float_avx512.cpp),
// which differ from the AVX2 level by summation order. dispatch only calls it after checking
// every one of those features.
#include "kernels/dot_kernels.h"
#include "kernels/dot_x86_impl.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__)
#error "dot_avx512.cpp must be compiled with AVX-512 VL and VNNI enabled"
#endif

namespace specula::simd {

namespace {
#include "kernels/dot_x86_kquants512.inc"
}  // namespace

VecDotFn avx512_vec_dot(GGMLType wt) {
    if (VecDotFn f = avx512_float_vec_dot(wt)) return f;  // 512-bit float kernels
    if (VecDotFn fn = x86_vec_dot_512(wt)) return fn;
    return x86_vec_dot(wt);
}

VecDotQ8Fn avx512_vec_dot_q8(GGMLType wt) {
    return x86_vec_dot_q8(wt);
}

VecDotRows2Fn avx512_vec_dot_rows2(GGMLType wt) {
    return x86_vec_dot_rows2(wt);
}

}  // namespace specula::simd
