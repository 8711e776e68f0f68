// AVX2 + AVX-VNNI tile kernels for packed Q4_K / Q6_K weights (kernels/layout/repack_k.h): the
// kernels of kernels/x86/gemm_kquants_256.inc with one VEX vpdpbusd per byte dot product (the same
// int32 lanes, so the same bits as the AVX2 build). The AVX2 level uses these when the CPU has
// AVX-VNNI (the table's AVX2 chain).
#if !defined(__AVXVNNI__)
#error "avxvnni/gemm_kquants.cpp must be compiled with AVX-VNNI enabled"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/isa_parts.h"
#include "kernels/layout/blocks.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/token_groups.h"

namespace specula::simd {
namespace {

SPECULA_INLINE __m256i dpbusd256(__m256i s, __m256i w, const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_dpbusd_avx_epi32(s, w, _mm256_set1_epi32(v));
}

// Q4_K: scaling each line (the AVX2 build's way) would take two instructions per line where
// vpdpbusd takes one: each sub-block's sum is scaled once instead (gemm_kquants_256.inc).
constexpr bool kScaleEachLine256 = false;

#include "kernels/x86/gemm_kquants_256.inc"

}  // namespace
}  // namespace specula::simd

namespace specula::avxvnni {

void add_gemm_kquants(KernelTable& t) {
    simd::add_kquant_tiles(t, Isa::AVXVNNI);
}

}  // namespace specula::avxvnni
