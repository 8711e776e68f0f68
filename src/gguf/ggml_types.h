// Tensor element types as GGUF numbers them (ggml_type), with their block geometry: a file-format
// concept, read by gguf/ and used by everything above it (the kernels compute with the types
// marked supported).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
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
    // 36..38 (the IQ4_NL 4x4 / 4x8 / 8x8 interleavings) were removed from the format.
    MXFP4 = 39,  // OCP microscaling FP4: 32 E2M1 values sharing one E8M0 (power of two) scale
    COUNT = 40,
};

struct TypeTraits {
    std::string_view name;  // "Q4_K", ... ; empty for numbers that name no type
    int64_t block_size;     // elements per block (1 for plain types)
    size_t type_size;       // bytes per block
    bool known;             // a type that exists in the GGUF format (sizes are right)
    bool supported;         // the engine can dequantize and dot it
};

namespace detail {
// Indexed by the type number; sizes as the GGUF format defines them.
inline constexpr TypeTraits kTypeTraits[] = {
    {"F32", 1, 4, true, true},         {"F16", 1, 2, true, true},
    {"Q4_0", 32, 18, true, true},      {"Q4_1", 32, 20, true, true},
    {"", 0, 0, false, false},          {"", 0, 0, false, false},
    {"Q5_0", 32, 22, true, true},      {"Q5_1", 32, 24, true, true},
    {"Q8_0", 32, 34, true, true},      {"Q8_1", 32, 36, true, false},
    {"Q2_K", 256, 84, true, true},     {"Q3_K", 256, 110, true, true},
    {"Q4_K", 256, 144, true, true},    {"Q5_K", 256, 176, true, true},
    {"Q6_K", 256, 210, true, true},    {"Q8_K", 256, 292, true, false},
    {"IQ2_XXS", 256, 66, true, false}, {"IQ2_XS", 256, 74, true, false},
    {"IQ3_XXS", 256, 98, true, false}, {"IQ1_S", 256, 50, true, false},
    {"IQ4_NL", 32, 18, true, true},    {"IQ3_S", 256, 110, true, false},
    {"IQ2_S", 256, 82, true, false},   {"IQ4_XS", 256, 136, true, true},
    {"I8", 1, 1, true, false},         {"I16", 1, 2, true, false},
    {"I32", 1, 4, true, false},        {"I64", 1, 8, true, false},
    {"F64", 1, 8, true, false},        {"IQ1_M", 256, 56, true, false},
    {"BF16", 1, 2, true, true},        {"", 0, 0, false, false},
    {"", 0, 0, false, false},          {"", 0, 0, false, false},
    {"TQ1_0", 256, 54, true, false},   {"TQ2_0", 256, 66, true, false},
    {"", 0, 0, false, false},          {"", 0, 0, false, false},
    {"", 0, 0, false, false},          {"MXFP4", 32, 17, true, true},
};
inline constexpr TypeTraits kUnknownType = {"", 0, 0, false, false};
}  // namespace detail

// Traits for any uint32 read from a file; unknown numbers give known == false. "supported" means
// usable as a weight type (Q8_1 and Q8_K exist only as activation formats).
constexpr const TypeTraits& type_traits(uint32_t t) {
    return t < std::size(detail::kTypeTraits) ? detail::kTypeTraits[t] : detail::kUnknownType;
}
constexpr const TypeTraits& type_traits(GGMLType t) {
    return type_traits(static_cast<uint32_t>(t));
}
constexpr std::string_view type_name(GGMLType t) {
    return type_traits(t).name;
}

// Bytes of a row of n elements (n must be a multiple of the block size).
inline size_t row_size(GGMLType t, int64_t n) {
    const auto& tr = type_traits(t);
    return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

}  // namespace specula
