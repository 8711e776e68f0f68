// The one table of the tensor types `specula quantize` can write: for each, the routine that
// quantizes whole rows of floats into it. The weight formats the kernels' scalar reference
// already writes (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the float types, kernels/quants.h) come from
// there; the K-quants and IQ4 from quantize/weight_quants.h.
#pragma once

#include <cstdint>

#include "gguf/ggml_types.h"

namespace specula::quant {

// Quantizes n floats (a multiple of the type's block size) into dst.
using RowQuantizer = void (*)(const float* src, void* dst, int64_t n);

// The quantizer of `t`, or nullptr where `specula quantize` cannot write `t`.
RowQuantizer row_quantizer(GGMLType t);

}  // namespace specula::quant
