// `specula quantize`: one GGUF file into another of a llama-quantize file type. The metadata is
// copied in order (split keys dropped), then general.quantization_version (2) and
// general.file_type are set last, as llama-quantize does; the tensors are written in
// llama-quantize's order (layer number, then name), each as the type quantize/type_mix.h picks,
// at 32-byte (or general.alignment) offsets. The output is written as it goes, tensor by tensor
// and a bounded slab of rows at a time, so a file far larger than RAM can be quantized; it is
// written to OUT.part and renamed to OUT once complete. For the deterministic types (every one
// here: no importance matrix) the file is the one llama-quantize writes, byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "quantize/type_mix.h"

namespace specula::quant {

struct QuantizeOptions {
    std::string input;
    std::string output;
    FileType type;
    int n_threads = 0;              // 0: the hardware threads
    bool allow_requantize = false;  // a quantized input tensor may be dequantized and requantized
    MixOptions mix;
    // One line per tensor (llama-quantize's log), or nothing when empty.
    std::function<void(const std::string&)> log;
};

struct QuantizeResult {
    uint64_t bytes_in = 0;   // the input tensors' data
    uint64_t bytes_out = 0;  // the output tensors' data
    int n_tensors = 0;
    int n_quantized = 0;  // tensors converted (the rest copied)
    int n_fallback = 0;   // tensors whose row length forced a fallback type
};

// Throws specula::Error naming the file, tensor and type for an input it cannot read, a type it
// cannot convert from (a quantized input without allow_requantize, or a type with no dequantizer),
// a row length no fallback fits, or a write failure (the partial output is removed).
QuantizeResult quantize_file(const QuantizeOptions& opt);

}  // namespace specula::quant
