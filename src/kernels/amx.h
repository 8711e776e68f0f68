// Intel AMX (Advanced Matrix Extensions) for packed Q8_0 and Q4_K weights: tile kernels that
// compute the same exact int32 sums as the AVX-512 VNNI tile kernels with one TDPBSUD per Q8_0
// block or Q4_K sub-block for 16 rows and up to 16 tokens (activations signed, in an A tile loaded
// straight from their rows; for Q8_0 the packed block's 8 lines of 64 bytes, kernels/repack.h, are
// already a B tile of unsigned bytes, Q4_K's nibbles are spread into one on AVX-512), then the
// same integer and float steps per (row, token) on AVX-512, so their results equal the reference
// kernels bit for bit and batch invariance holds whichever kernel a pass uses. Q6_K, F16 and BF16
// have none (gemm_amx.cpp says why).
//
// It is part of the AVX-512 level: matmul uses them for packed passes over several tokens when
// amx_active(): the CPU has AMX-TILE and AMX-INT8, the kernel grants this process the tile state
// (arch_prctl ARCH_REQ_XCOMP_PERM), a self-test of the kernel against packed_tile_ref passed at
// the first use, SPECULA_SIMD is unset or `amx` (`avx512` and below turn it off) and SPECULA_AMX is
// not 0. SPECULA_AMX=emulate runs the same kernel over a scalar emulation of the tile instructions
// on any AVX-512 CPU (slow; for tests of the kernel's logic on machines without AMX).
#pragma once

#include "kernels/repack.h"
#include "kernels/types.h"

namespace specula {

// Whether this CPU and OS can run the AMX kernel (probed once: CPUID, XCR0, the tile permission
// and the self-test). A failed self-test prints one warning on stderr.
bool cpu_has_amx();

// Whether matmul uses the AMX kernel now (see above). Read on every call, as SPECULA_SIMD is.
bool amx_active();

// The AMX tile kernel for packed weights of type t (Q8_0, Q4_K; nullptr for others), on the
// hardware or emulated; any token count (fewer than 4 run on the AVX-512 tile kernel, which gives
// the same bits). Only call the hardware one where cpu_has_amx(); the emulated one needs AVX-512.
PackedTileFn amx_packed_tile(GGMLType t);
PackedTileFn amx_packed_tile_emulated(GGMLType t);

// The one matmul uses now for type t: the hardware or the emulated kernel, or nullptr where
// !amx_active() or t has none.
PackedTileFn best_amx_packed_tile(GGMLType t);

}  // namespace specula
