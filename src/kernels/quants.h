// Scalar reference code for every supported tensor type: dequantization, the activation
// quantizers, and the dot product of a weight row with an activation row. The SIMD kernels
// (kernels/table.h) must give results equal to these (up to float summation order) and are
// tested against them.
//
// Like llama.cpp, a matmul first rounds the float activations to the weight type's
// "vec_dot_type" (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants
// and IQ4_XS, F16 for F16, BF16 for BF16, F32 for F32), then takes integer (or half) dot products.
#pragma once

#include <cstdint>

#include "gguf/ggml_types.h"

namespace specula {

// Activation type a weight type is dotted with.
GGMLType vec_dot_type(GGMLType weight_type);

// dst[0..n) = values of a row of `n` elements of type t. n must be a multiple of the block size.
// Throws Error for an unsupported type.
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);

// Reference quantizer. Supported targets: F32, F16, BF16, Q8_0, Q8_1, Q8_K (the activation
// types) and Q4_0, Q4_1, Q5_0, Q5_1, MXFP4 (simple round-to-nearest, for tests and tools).
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);

// The activation rounding of llama.cpp's x86 CPU backend, bit for bit: ggml-cpu's SIMD
// quantize_row_q8_0 / q8_1 compute id = 127 / amax and round ties to even, where the reference
// quantizers above (ggml's *_ref, also what llama-quantize writes) use id = 1 / d and roundf; the
// two differ on about 2e-6 of the elements. Identical to quantize_row for every other type (Q8_K,
// F16 and BF16 activations are rounded the same way by both). Use it for matmul activations to
// reproduce llama.cpp's logits to the last bits.
void quantize_row_ggml_cpu(GGMLType t, const float* src, void* dst, int64_t n);

// Scalar dot product: weight row `w` (type t, n elements) with activation row `a` already
// quantized to vec_dot_type(t).
float vec_dot_ref(GGMLType t, int64_t n, const void* w, const void* a);

}  // namespace specula
