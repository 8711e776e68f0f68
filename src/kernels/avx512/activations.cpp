// The FFN activations at avx512's width (kernels/x86/activations.h).
#include "kernels/x86/activations.h"

#include "kernels/isa_parts.h"

namespace specula::avx512 {

void add_activations(KernelTable& t) {
    ActivationEntry& e = t.activation(Isa::AVX512);
    e.silu_mul = &simd::silu_mul_vec;
    e.gelu_mul = &simd::gelu_mul_vec;
    e.swiglu_oai = &simd::swiglu_oai_vec;
}

}  // namespace specula::avx512
