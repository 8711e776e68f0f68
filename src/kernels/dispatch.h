// Run-time choice of the fastest dot-product kernel per weight type: AVX-512 (with VNNI/BF16, and
// AMX tiles for packed Q8_0 passes over several tokens where the CPU has them: kernels/amx.h),
// AVX2, or the scalar reference. SPECULA_SIMD=scalar|avx2|avx512|amx caps the level (tests use
// it; `avx512` is AVX-512 without AMX); any other value makes active_simd_level() throw Error.
//
// Every level has a kernel for each supported weight type. The AVX2 and AVX-512 levels run the
// same kernel source (the AVX-512 build uses VNNI for byte dot products), except Q4_K / Q5_K /
// Q6_K, which have 512-bit kernels of their own at the AVX-512 level that compute the same
// integer lanes and float steps (bit-identical results), and the float types (F32, F16, BF16),
// whose tile kernels use 8-lane chains at AVX2 and 16-lane chains at AVX-512. The scalar level
// wraps vec_dot_ref. Results differ between levels only by float summation order (a process
// uses one level throughout, so batch invariance holds at each).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/repack.h"
#include "kernels/types.h"

namespace specula {

enum class SimdLevel { Scalar = 0, AVX2 = 1, AVX512 = 2 };

SimdLevel cpu_simd_level();     // what this CPU supports
SimdLevel active_simd_level();  // min(cpu, SPECULA_SIMD)
const char* simd_level_name(SimdLevel l);

// out[t] = dot(w, a + t * a_stride) for t < ntok; w is a row of n elements of type wt, each
// activation row is in vec_dot_type(wt). out[t] must not depend on ntok (batch invariance).
using VecDotFn = void (*)(int64_t n, const void* w, const void* a, size_t a_stride, int ntok,
                          float* out);

// The kernel for `wt` at exactly `level`, or nullptr if that level has none for this type.
VecDotFn vec_dot_kernel(GGMLType wt, SimdLevel level);
// The best kernel at or below active_simd_level() (the scalar reference always exists for a
// supported type).
VecDotFn best_vec_dot(GGMLType wt);

// Rounds a row of n floats to an activation type (Q8_0, Q8_1, Q8_K, F16, BF16, F32) with results
// bit-identical to quantize_row_ggml_cpu (kernels/quants.h); n must be a multiple of the block
// size.
using QuantizeRowFn = void (*)(const float* x, void* dst, int64_t n);

// The fastest such quantizer at or below active_simd_level(), or nullptr for other types.
QuantizeRowFn best_quantize_row(GGMLType act_type);

// The tile kernel for packed Q8_0 weights (kernels/repack.h) at exactly `level` (the scalar level
// is packed_tile_ref), and the one at active_simd_level() (the AMX one where amx_active()). All
// levels give the same bits.
PackedTileFn packed_tile_kernel(SimdLevel level);
PackedTileFn best_packed_tile();

// The pair kernel (kernels/repack.h) for packed weights of type t at exactly `level`, or nullptr
// where that level has none: only AVX-512 for Q8_0 has one (for Q4_K / Q6_K a pair measured no
// faster on Zen 5: those kernels are bound by their decoding and scale steps, not by loads). A
// caller without one runs the tile kernel on each tile, which gives the same bits. And the one at
// active_simd_level(), none when SPECULA_PACKED_PAIR=0 (for measuring the two against each other).
PackedPairFn packed_pair_kernel(GGMLType t, SimdLevel level);
PackedPairFn best_packed_pair(GGMLType t);

}  // namespace specula
