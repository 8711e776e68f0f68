// AVX2 tile kernel for packed Q8_0 weights (kernels/repack.h): a 16-row tile as two halves of 8
// rows (the two 32-byte halves of each 64-byte line), up to 3 tokens per pass. Without VNNI the
// exact int32 block dot product comes from the signed weights (q = stored ^ 0x80) by the sign
// trick, maddubs(|q|, sign(a, q)) then madd with ones (|q| <= 128 and |a| <= 127 keep each pair
// sum within int16). The float steps are packed_tile_ref's, so the results equal it and the
// AVX-512 kernel bit for bit.
#include <immintrin.h>

#include <cstring>

#include "kernels/isa_parts.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/token_groups.h"

namespace specula::simd {

namespace {

#define SPECULA_INLINE __attribute__((always_inline)) inline

constexpr int kMaxTokens = 3;   // 2 x 3 float + 3 int accumulators and the weights: 16 registers
constexpr int kAheadPairs = 8;  // block pairs (1088 bytes each) to prefetch ahead (measured: 3..16)

SPECULA_INLINE int32_t load32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

template <int NT>
void tile_tokens(const uint8_t* tile, const PackedActs& a, int lo, int hi, float* y, int64_t ldy) {
    __m256 acc[2][NT];
    for (int t = 0; t < NT; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_ps();
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < a.nb; ++b) {
        const uint8_t* pair = tile + (b >> 1) * 1088;
        if ((b & 1) == 0) {
            const char* pf = reinterpret_cast<const char*>(pair) + kAheadPairs * 1088;
            for (int l = 0; l < 17; ++l) prefetch_weights<NT>(pf + 64 * l);
        }
        const uint8_t* scales = pair + (b & 1) * 32;
        const uint8_t* wq = pair + 64 + (b & 1) * 512;
        for (int h = 0; h < 2; ++h) {
            const __m256 dw =
                _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales + 16 * h)));
            __m256i s[NT];
            for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_si256();
            for (int g = 0; g < 8; ++g) {
                const __m256i q = _mm256_xor_si256(
                    _mm256_load_si256(reinterpret_cast<const __m256i*>(wq + 64 * g + 32 * h)),
                    flip);
                const __m256i uq = _mm256_sign_epi8(q, q);
                for (int t = 0; t < NT; ++t) {
                    const uint8_t* qa = a.q + t * a.stride + b * 34 + 2 + 4 * g;
                    const __m256i av = _mm256_set1_epi32(load32(qa));
                    const __m256i p = _mm256_maddubs_epi16(uq, _mm256_sign_epi8(av, q));
                    s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p, ones));
                }
            }
            for (int t = 0; t < NT; ++t) {
                const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(a.d[t * a.nb + b]));
                acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), sc, acc[h][t]);
            }
        }
    }
    for (int t = 0; t < NT; ++t) {
        if (lo == 0 && hi == 16) {
            _mm256_storeu_ps(y + t * ldy, acc[0][t]);
            _mm256_storeu_ps(y + t * ldy + 8, acc[1][t]);
        } else {
            alignas(32) float tmp[16];
            _mm256_store_ps(tmp, acc[0][t]);
            _mm256_store_ps(tmp + 8, acc[1][t]);
            for (int r = lo; r < hi; ++r) y[t * ldy + (r - lo)] = tmp[r];
        }
    }
}

void tile_avx2(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
               int64_t ldy) {
    token_groups<kMaxTokens>(a, ntok, [&](auto n, const PackedActs& at, int t) {
        tile_tokens<n()>(tile, at, lo, hi, y + t * ldy, ldy);
    });
}

}  // namespace

}  // namespace specula::simd

namespace specula::avx2 {

void add_gemm_q8(KernelTable& t) {
    t.add(GGMLType::Q8_0, Layout::Packed, Isa::AVX2, TokenClass::Any).tile = &simd::tile_avx2;
}

}  // namespace specula::avx2
