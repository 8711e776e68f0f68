// Intel AMX (Advanced Matrix Extensions) for packed Q8_0 weights: a tile kernel that computes the
// same exact int32 block sums as the AVX-512 VNNI tile kernel with one TDPBSUD per block and 16
// tokens (activations signed, in an A tile loaded straight from the Q8_0 rows; the packed block's
// 8 lines of 64 bytes, kernels/repack.h, are already a B tile of unsigned bytes), then the same
// float steps per (row, token, block) on AVX-512, so its results equal packed_tile_ref bit for bit
// and batch invariance holds whichever kernel a pass uses.
//
// It is part of the AVX-512 level: matmul uses it for packed Q8_0 passes over several tokens when
// amx_active(): the CPU has AMX-TILE and AMX-INT8, the kernel grants this process the tile state
// (arch_prctl ARCH_REQ_XCOMP_PERM), a self-test of the kernel against packed_tile_ref passed at
// the first use, SPECULA_SIMD is unset or `amx` (`avx512` and below turn it off) and SPECULA_AMX is
// not 0. SPECULA_AMX=emulate runs the same kernel over a scalar emulation of the tile instructions
// on any AVX-512 CPU (slow; for tests of the kernel's logic on machines without AMX).
#pragma once

#include "kernels/repack.h"

namespace specula {

// Whether this CPU and OS can run the AMX kernel (probed once: CPUID, XCR0, the tile permission
// and the self-test). A failed self-test prints one warning on stderr.
bool cpu_has_amx();

// Whether matmul uses the AMX kernel now (see above). Read on every call, as SPECULA_SIMD is.
bool amx_active();

// The AMX tile kernel for packed Q8_0 weights (ntok <= kPackTokenBlock tokens a call; fewer than
// 4 run on the AVX-512 tile kernel, which gives the same bits), on the hardware or emulated. Only
// call the hardware one where cpu_has_amx(); the emulated one needs AVX-512.
PackedTileFn amx_packed_tile();
PackedTileFn amx_packed_tile_emulated();

// The one matmul uses now: the hardware or the emulated kernel, or nullptr where !amx_active().
PackedTileFn best_amx_packed_tile();

}  // namespace specula
