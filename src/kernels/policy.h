// KernelPolicy: the switches that choose among the kernels, as one plain value. Kernels never read
// the environment: the process default is kernel_policy_from_env(env_settings()) (common/env.h,
// made on first use), and set_kernel_policy() / ScopedKernelPolicy replace it in-process (tests
// step through the levels this way; bench_kernels compares AMX with VNNI). Set it only while no
// kernel runs: lookups read it on every call, so a change applies from the next matmul.
#pragma once

#include "kernels/simd_level.h"

namespace specula {

struct EnvSettings;

enum class AmxMode { Off, Hardware, Emulate };  // Emulate: the AMX kernel over a scalar emulation
enum class Bf16Dot { Auto, On, Off };           // Auto: on where vdpbf16ps runs at the FMA's rate
enum class KqMulld { Auto, On, Off };           // Auto: on where vpmulld runs at vpdpwssd's rate

struct KernelPolicy {
    SimdLevel simd_cap = SimdLevel::AVX512;  // the highest level used (the CPU's caps it too)
    AmxMode amx = AmxMode::Hardware;         // at the AVX-512 level: AMX tiles where they run
    bool packed_pair = true;                 // the packed Q8_0 pair kernel (two tiles at once)
    Bf16Dot bf16_dot = Bf16Dot::Auto;        // BF16 panels on vdpbf16ps at AVX-512
    KqMulld kq_mulld = KqMulld::Auto;        // packed Q4_K / Q6_K scaled by vpmulld at AVX-512
    bool hugepages = true;                   // PackedBuffer asks for 2 MiB pages
    bool repack_float = true;                // Model::load packs F16 / BF16 matrices
};

// SPECULA_SIMD (scalar|avx2|avx512|amx: the cap; a cap below `amx` turns the AMX hardware off),
// SPECULA_AMX (0: off, emulate), SPECULA_PACKED_PAIR, SPECULA_BF16_DOT, SPECULA_KQ_MULLD,
// SPECULA_HUGEPAGES and SPECULA_REPACK_FLOAT, as EnvSettings holds them.
KernelPolicy kernel_policy_from_env(const EnvSettings& env);

// The policy in force (the environment's until set_kernel_policy is called).
const KernelPolicy& kernel_policy();
void set_kernel_policy(const KernelPolicy& p);

// Sets the policy for a scope and restores the previous one.
class ScopedKernelPolicy {
  public:
    explicit ScopedKernelPolicy(const KernelPolicy& p) : old_(kernel_policy()) {
        set_kernel_policy(p);
    }
    ~ScopedKernelPolicy() { set_kernel_policy(old_); }
    ScopedKernelPolicy(const ScopedKernelPolicy&) = delete;
    ScopedKernelPolicy& operator=(const ScopedKernelPolicy&) = delete;

  private:
    KernelPolicy old_;
};

// The level kernels run at: min(the CPU's, the policy's cap).
SimdLevel active_simd_level();
// Whether BF16 panels run on vdpbf16ps under the policy (Auto: on AMD CPUs). Measured on one core,
// register operands, 16 independent chains: Zen 5 runs vdpbf16ps at the rate of vfmadd231ps (7.7
// against 7.2 G/s), twice the multiply-adds; an Emerald Rapids Xeon at a quarter of it (1.25
// against 5.2 G/s), so there the FMA panels are 1.7x faster (bench_kernels, 1024 x 2048 BF16 hot,
// one core: 512 tokens 17.2 against 29.1 ms, 9 tokens 0.34 against 0.54 ms).
bool bf16_dot_at_avx512();
// Whether the packed Q4_K / Q6_K tiles scale each sub-block's int32 dot by vpmulld under the policy
// (Auto: on AMD CPUs), one multiply per (sub-block, token) where the other kernel spends two
// vpdpwssd on its int16 halves. Measured on one core, register operands, 12 independent chains:
// Zen 4 runs vpmulld, vpdpwssd, vpdpbusd and vfmadd231ps zmm at one per cycle each, all on the
// same two pipes; Intel splits vpmulld into two uops on port 0 (the 5- to 16-token Q4_K kernels
// ~10% slower that way on an Intel Xeon).
bool kq_mulld_at_avx512();

}  // namespace specula
