// Tensor element types as GGUF numbers them (ggml_type), with their block geometry.
// Every type the engine can compute with has a scalar reference in kernels/quants.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace specula {

enum class GGMLType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    // 4 and 5 (Q4_2, Q4_3) were removed from the format.
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    COUNT = 39,
};

struct TypeTraits {
    std::string_view name;  // "Q4_K", ... ; empty for numbers that name no type
    int64_t block_size;     // elements per block (1 for plain types)
    size_t type_size;       // bytes per block
    bool known;             // a type that exists in the GGUF format (sizes are right)
    bool supported;         // the engine can dequantize and dot it
};

// Traits for any uint32 read from a file; unknown numbers give known == false.
const TypeTraits& type_traits(uint32_t t);
inline const TypeTraits& type_traits(GGMLType t) { return type_traits(static_cast<uint32_t>(t)); }
inline std::string_view type_name(GGMLType t) { return type_traits(t).name; }

// Bytes of a row of n elements (n must be a multiple of the block size).
inline size_t row_size(GGMLType t, int64_t n) {
    const auto& tr = type_traits(t);
    return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

}  // namespace specula
