// The SIMD levels a process runs its kernels at, lowest first: the scalar references, AVX2 (+ FMA,
// F16C) and AVX-512 (F/BW/VL/DQ/VNNI/BF16; AMX tiles, where present, are part of this level).
#pragma once

namespace specula {

enum class SimdLevel { Scalar = 0, AVX2 = 1, AVX512 = 2 };

const char* simd_level_name(SimdLevel l);

// The highest level this CPU runs (kernels/cpu.h).
SimdLevel cpu_simd_level();

}  // namespace specula
