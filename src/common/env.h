// The process environment: the one place Specula reads it. Every SPECULA_* variable is a
// developer or test switch (the command line is the user's interface); each is parsed here, once,
// into a plain value, and the code that acts on it takes that value as a parameter (the kernel
// policy, the load options, the GPU placement defaults). A malformed value is an Error naming the
// variable and what it accepts, never silently ignored.
#pragma once

#include <optional>
#include <string>

namespace specula {

struct EnvSettings {
    // Kernels (kernels/policy.h turns these into a KernelPolicy).
    std::string simd;         // SPECULA_SIMD: "", scalar, avx2, avx512, amx (a cap on the level)
    std::string amx;          // SPECULA_AMX: "", 0 (off), emulate
    bool packed_pair = true;  // SPECULA_PACKED_PAIR=0: no Q8_0 pair kernel
    int bf16_dot = -1;        // SPECULA_BF16_DOT: 1 / 0 force vdpbf16ps on / off; -1: by vendor
    int kq_mulld = -1;        // SPECULA_KQ_MULLD: 1 / 0 force vpmulld K-quant tiles; -1: by vendor
    bool hugepages = true;    // SPECULA_HUGEPAGES=0: packed weights on 4 KiB pages
    // Model loading.
    bool repack = true;        // SPECULA_REPACK=0: keep every weight in its file layout
    bool repack_float = true;  // SPECULA_REPACK_FLOAT=0: keep F16 / BF16 in the row layout
    // GPU placement defaults (the CLI's -ngl / -ngld override them); -1: unset.
    int ngl = -1;                  // SPECULA_NGL
    int ngld = -1;                 // SPECULA_NGLD
    double vulkan_memory_mib = 0;  // SPECULA_VULKAN_MEMORY_MIB: cap on device memory (0: none)
};

// The settings as the environment holds them now. Throws Error naming a malformed variable.
EnvSettings read_env();

// read_env() of the first call, kept for the process (what the engine's defaults come from).
const EnvSettings& env_settings();

// One variable's raw value, for settings that are not Specula's own (HOME, TERM, ...): null when
// unset or empty.
std::optional<std::string> env_value(const char* name);

}  // namespace specula
