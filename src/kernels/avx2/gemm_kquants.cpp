// AVX2 tile kernels for packed Q4_K / Q6_K weights (kernels/layout/repack_k.h): the kernels of
// kernels/x86/gemm_kquants_256.inc with vpmaddubsw + vpmaddwd byte dot products.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/isa_parts.h"
#include "kernels/layout/blocks.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/token_groups.h"

namespace specula::simd {
namespace {

// Weights are unsigned (<= 63) and activations in [-128, 127], so each vpmaddubsw pair sum
// (<= 2 * 63 * 128) stays within int16 and nothing saturates.
SPECULA_INLINE __m256i dpbusd256(__m256i s, __m256i w, const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    const __m256i prod = _mm256_maddubs_epi16(w, _mm256_set1_epi32(v));
    return _mm256_add_epi32(s, _mm256_madd_epi16(prod, _mm256_set1_epi16(1)));
}

// Q4_K: the scale goes into the vpmaddwd, line by line (gemm_kquants_256.inc).
constexpr bool kScaleEachLine256 = true;

#include "kernels/x86/gemm_kquants_256.inc"

}  // namespace
}  // namespace specula::simd

namespace specula::avx2 {

void add_gemm_kquants(KernelTable& t) {
    simd::add_kquant_tiles(t, Isa::AVX2);
}

}  // namespace specula::avx2
