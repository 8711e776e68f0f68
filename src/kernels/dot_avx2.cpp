// AVX2 + FMA + F16C build of the x86 dot-product kernels (kernels/dot_x86_impl.h); the float
// types take the float tile kernels (dot_float_avx2.cpp) instead.
#include "kernels/dot_kernels.h"
#include "kernels/dot_x86_impl.h"

namespace specula::simd {

VecDotFn avx2_vec_dot(GGMLType wt) {
    if (VecDotFn f = avx2_float_vec_dot(wt)) return f;  // the float tile kernels
    return x86_vec_dot(wt);
}

VecDotQ8Fn avx2_vec_dot_q8(GGMLType wt) {
    return x86_vec_dot_q8(wt);
}

}  // namespace specula::simd
