// AVX2 + AVX-VNNI tile kernels for packed Q4_K / Q6_K weights (kernels/repack_k.h, the kernels in
// kernels/gemm_kquants_256.inc): the byte dot products are one VEX vpdpbusd each instead of
// vpmaddubsw + vpmaddwd + vpaddd. The int32 lanes are the same, so are the results (bit for bit).
// The AVX2 level uses these when the CPU has AVX-VNNI (kq_packed_tile_kernel).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/packed_kquant_kernels.h"

#if !defined(__AVXVNNI__)
#error "gemm_kquants_avxvnni.cpp must be compiled with AVX-VNNI enabled"
#endif

namespace specula::simd {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

SPECULA_INLINE __m256i dpbusd256(__m256i s, __m256i w, const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_dpbusd_avx_epi32(s, w, _mm256_set1_epi32(v));
}

#include "kernels/gemm_kquants_256.inc"

}  // namespace

PackedTileFn avxvnni_kq_packed_tile(GGMLType t) {
    return tile_256_for(t);
}

}  // namespace specula::simd
