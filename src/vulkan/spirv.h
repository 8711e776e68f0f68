// The compute shaders, compiled to SPIR-V at build time (src/vulkan/shaders, glslc) and embedded
// in the binary by embed_spirv.cmake; find_spirv() looks one up by name (the shader file's stem,
// with the type suffix of a matvec variant, e.g. "matvec_q8_0").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace specula::vk {

struct SpirvBlob {
    const char* name;
    const uint32_t* words;
    size_t n_words;
};

extern const SpirvBlob kSpirv[];
extern const size_t kSpirvCount;

// nullptr when no shader has that name.
inline const SpirvBlob* find_spirv(std::string_view name) {
    for (size_t i = 0; i < kSpirvCount; ++i) {
        if (name == kSpirv[i].name) return &kSpirv[i];
    }
    return nullptr;
}

}  // namespace specula::vk
