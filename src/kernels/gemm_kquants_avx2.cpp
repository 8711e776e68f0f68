// AVX2 tile kernels for packed Q4_K / Q6_K weights (kernels/repack_k.h, the kernels in
// kernels/gemm_kquants_256.inc). Without VNNI the exact int32 byte dot product is vpmaddubsw then
// vpmaddwd with ones: weights are unsigned (<= 63) and activations in [-128, 127], so each pair
// sum (<= 2 * 63 * 128) stays within int16 and nothing saturates.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/packed_kquant_kernels.h"

namespace specula::simd {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

SPECULA_INLINE __m256i dpbusd256(__m256i s, __m256i w, const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    const __m256i prod = _mm256_maddubs_epi16(w, _mm256_set1_epi32(v));
    return _mm256_add_epi32(s, _mm256_madd_epi16(prod, _mm256_set1_epi16(1)));
}

#include "kernels/gemm_kquants_256.inc"

}  // namespace

PackedTileFn avx2_kq_packed_tile(GGMLType t) {
    return tile_256_for(t);
}

}  // namespace specula::simd
