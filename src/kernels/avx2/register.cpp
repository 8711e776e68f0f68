// The AVX2 (+ FMA, F16C) kernels' registration, and AVX-VNNI's where the CPU has it.
#include "kernels/cpu.h"
#include "kernels/isa_parts.h"

namespace specula {

void register_avx2(KernelTable& t) {
    avx2::add_dot(t);
    avx2::add_dot_float(t);
    avx2::add_gemm_q8(t);
    avx2::add_gemm_kquants(t);
    avx2::add_quantize(t);
    avx2::add_attention(t);
    avx2::add_activations(t);
    if (cpu_features().avx_vnni) avxvnni::add_gemm_kquants(t);
}

}  // namespace specula
