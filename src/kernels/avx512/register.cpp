// The AVX-512 (F/BW/VL/DQ/VNNI/BF16) kernels' registration. The quantizers and attention's
// one-query loops are AVX2's (the table's AVX-512 chain falls back to AVX2 for them).
#include "kernels/isa_parts.h"

namespace specula {

void register_avx512(KernelTable& t) {
    avx512::add_dot(t);
    avx512::add_dot_float(t);
    avx512::add_dot_bf16(t);
    avx512::add_gemm_q8(t);
    avx512::add_gemm_kquants(t);
    avx512::add_attention(t);
    avx512::add_activations(t);
}

}  // namespace specula
