// What this CPU (and its OS) can run: the one probe of the instruction sets the kernels are built
// for (CPUID and XGETBV, read once per process). The kernel table (kernels/table.h) registers an
// ISA's kernels only where the probe found it, so nothing compiled for an ISA runs without it.
// With SPECULA_NO_CPU_PROBE (the fuzz build) or off x86 every feature reads false: scalar only.
#pragma once

namespace specula {

struct CpuFeatures {
    bool avx2 = false;    // AVX2 + FMA + F16C, with the OS saving the AVX state
    bool avx512 = false;  // AVX-512 F/BW/VL/DQ/VNNI/BF16, with the OS saving its state (needs avx2)
    bool avx_vnni = false;    // AVX-VNNI (VEX vpdpbusd; needs avx2)
    bool avx512vbmi = false;  // AVX-512 VBMI (vpermi2b, for the AMX Q4_K kernel; needs avx512)
    bool amx = false;         // AMX-TILE + AMX-INT8 with the OS saving the tile state (needs avx512
                              // and avx512vbmi, which every AMX CPU has);
                              // the process must still ask the kernel for the tile data (amx/)
    bool amd = false;         // vendor AuthenticAMD (vdpbf16ps runs at the FMA's rate there)
};

const CpuFeatures& cpu_features();

}  // namespace specula
