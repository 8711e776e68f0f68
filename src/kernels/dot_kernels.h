// Private to kernels/: the per-level kernel and quantizer tables that kernels/dispatch.cpp chooses
// from. Each
// *_avx2.cpp / *_avx512.cpp translation unit is compiled with its own target flags; nothing in it
// may run before dispatch has checked that the CPU has those instructions.
#pragma once

#include "kernels/dispatch.h"

namespace specula::simd {

// nullptr when that level has no kernel for the weight type.
VecDotFn avx2_vec_dot(GGMLType wt);
VecDotFn avx512_vec_dot(GGMLType wt);

// AVX2 activation quantizers (quantize_avx2.cpp); nullptr for a type it does not handle.
QuantizeRowFn avx2_quantize_row(GGMLType act_type);

}  // namespace specula::simd
