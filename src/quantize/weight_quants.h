// The weight quantizers `specula quantize` writes files with, for the formats the scalar reference
// (kernels/quants.h) has no quantizer for: Q4_K, Q5_K, Q6_K (K-quants without an importance
// matrix) and IQ4_NL, IQ4_XS. Each follows the algorithm of ggml's reference quantizer for the
// format, step for step in the same float arithmetic, so a file quantized here is byte for byte
// the file llama-quantize writes (tests/quantize check that against files it made). n is a
// multiple of the format's block size (256; IQ4_NL 32).
#pragma once

#include <cstdint>

#include "kernels/layout/blocks.h"

namespace specula::quant {

void quantize_q4_K(const float* x, block_q4_K* y, int64_t n);
void quantize_q5_K(const float* x, block_q5_K* y, int64_t n);
void quantize_q6_K(const float* x, block_q6_K* y, int64_t n);
void quantize_iq4_nl(const float* x, block_iq4_nl* y, int64_t n);
void quantize_iq4_xs(const float* x, block_iq4_xs* y, int64_t n);

// Round half to even, as ggml's nearest_int (exact for |x| < 2^22, all that the quantizers give).
int nearest_int(float x);

}  // namespace specula::quant
