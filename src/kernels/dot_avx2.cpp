// AVX2 + FMA + F16C dot-product kernels (placeholder table: filled in type by type).
#include "kernels/dot_kernels.h"

namespace specula::simd {

VecDotFn avx2_vec_dot(GGMLType wt) {
    return nullptr;
}

}  // namespace specula::simd
