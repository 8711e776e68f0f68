// AVX-512 (F/BW/VL/DQ/VNNI/BF16) dot-product kernels (placeholder table: filled in type by type).
#include "kernels/dot_kernels.h"

namespace specula::simd {

VecDotFn avx512_vec_dot(GGMLType wt) {
    return nullptr;
}

}  // namespace specula::simd
