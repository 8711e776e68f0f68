// 64-bit FNV-1a, the one hash of file identities (gguf/file_identity.h) and of the packed-weight
// cache's keys (model/load/pack_cache.h): not cryptographic, stable across runs and builds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula {

constexpr uint64_t kFnv1aBasis = 14695981039346656037ull;

// h extended by the n bytes at p.
inline uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

// h extended by v's 8 bytes, least significant first (the same on every host).
inline uint64_t fnv1a_u64(uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; ++i) {
        const unsigned char b = static_cast<unsigned char>(v >> (8 * i));
        h = fnv1a(h, &b, 1);
    }
    return h;
}

}  // namespace specula
