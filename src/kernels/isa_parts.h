// Private to kernels/: what each ISA translation unit adds to the kernel table. An ISA's
// registration function (register_avx2, register_avx512, register_amx in kernels/<isa>/) calls its
// parts; each part is compiled with its ISA's flags and only runs where the CPU probe found that
// ISA (kernels/table.cpp).
#pragma once

#include "kernels/table.h"

namespace specula {

namespace avx2 {
void add_dot(KernelTable& t);           // dot.cpp: row-layout quantized types
void add_dot_float(KernelTable& t);     // dot_float.cpp: F32 / F16 / BF16 rows, F16 / BF16 panels
void add_gemm_q8(KernelTable& t);       // gemm_q8.cpp: packed Q8_0 tiles
void add_gemm_kquants(KernelTable& t);  // gemm_kquants.cpp: packed Q4_K / Q6_K tiles
void add_quantize(KernelTable& t);      // quantize.cpp: activation quantizers
void add_attention(KernelTable& t);     // attention.cpp: attention loops, KV row conversions
void add_activations(KernelTable& t);   // activations.cpp: silu / gelu times up
}  // namespace avx2

namespace avxvnni {
void add_gemm_kquants(KernelTable& t);  // the AVX2 packed K-quant tiles with VEX vpdpbusd
}  // namespace avxvnni

namespace avx512 {
void add_dot(KernelTable& t);
void add_dot_float(KernelTable& t);
void add_dot_bf16(KernelTable& t);  // dot_bf16.cpp: BF16 panels on vdpbf16ps (Isa::AVX512BF16Dot)
void add_gemm_q8(KernelTable& t);
void add_gemm_kquants(KernelTable& t);
void add_attention(KernelTable& t);
void add_activations(KernelTable& t);
}  // namespace avx512

namespace amx {
// Asks the OS for the tile data and runs the hardware kernels against the references: whether
// they can be used (only called where the CPU probe found AMX).
bool grant_and_self_test();
// The self-test itself, over the hardware tiles or their emulation (any AVX-512 CPU): true when
// the kernels equal the references; throws where it cannot run.
bool self_test(bool emulated);
}  // namespace amx

}  // namespace specula
