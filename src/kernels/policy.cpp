// The kernel policy (see policy.h): built from EnvSettings, held for the process, replaceable.
#include "kernels/policy.h"

#include "common/env.h"
#include "kernels/cpu.h"

namespace specula {

namespace {

KernelPolicy& current() {
    static KernelPolicy p = kernel_policy_from_env(env_settings());
    return p;
}

}  // namespace

KernelPolicy kernel_policy_from_env(const EnvSettings& env) {
    KernelPolicy p;
    if (env.simd == "scalar") p.simd_cap = SimdLevel::Scalar;
    if (env.simd == "avx2") p.simd_cap = SimdLevel::AVX2;
    // SPECULA_AMX=0 turns AMX off, =emulate emulates it at any cap; otherwise a cap other than
    // `amx` turns the hardware off.
    if (env.amx == "0") {
        p.amx = AmxMode::Off;
    } else if (env.amx == "emulate") {
        p.amx = AmxMode::Emulate;
    } else if (!env.simd.empty() && env.simd != "amx") {
        p.amx = AmxMode::Off;
    }
    p.packed_pair = env.packed_pair;
    p.bf16_dot = env.bf16_dot < 0 ? Bf16Dot::Auto : env.bf16_dot ? Bf16Dot::On : Bf16Dot::Off;
    p.kq_mulld = env.kq_mulld < 0 ? KqMulld::Auto : env.kq_mulld ? KqMulld::On : KqMulld::Off;
    p.hugepages = env.hugepages;
    p.repack_float = env.repack_float;
    return p;
}

const KernelPolicy& kernel_policy() {
    return current();
}

void set_kernel_policy(const KernelPolicy& p) {
    current() = p;
}

const char* simd_level_name(SimdLevel l) {
    switch (l) {
        case SimdLevel::Scalar:
            return "scalar";
        case SimdLevel::AVX2:
            return "avx2";
        case SimdLevel::AVX512:
            return "avx512";
    }
    return "unknown";
}

SimdLevel cpu_simd_level() {
    const CpuFeatures& f = cpu_features();
    return f.avx512 ? SimdLevel::AVX512 : f.avx2 ? SimdLevel::AVX2 : SimdLevel::Scalar;
}

SimdLevel active_simd_level() {
    const SimdLevel cpu = cpu_simd_level(), cap = kernel_policy().simd_cap;
    return static_cast<int>(cap) < static_cast<int>(cpu) ? cap : cpu;
}

namespace {

// A by-vendor switch (Bf16Dot, KqMulld): as set, or where Auto, on AMD CPUs.
template <class Choice>
bool on_or_amd(Choice c) {
    return c == Choice::Auto ? cpu_features().amd : c == Choice::On;
}

}  // namespace

bool bf16_dot_at_avx512() {
    return on_or_amd(kernel_policy().bf16_dot);
}

bool kq_mulld_at_avx512() {
    return on_or_amd(kernel_policy().kq_mulld);
}

}  // namespace specula
