// The AMX tile kernels for packed Q8_0 and Q4_K weights, their registration and their self-test.
//
// They compute the same exact int32 sums as the AVX-512 VNNI tile kernels with one TDPBSUD per
// Q8_0 block or Q4_K sub-block for 16 rows and up to 16 tokens, then the same integer and float
// steps per (row, token) on AVX-512, so their results equal the reference kernels bit for bit and
// batch invariance holds whichever kernel a pass uses. They are part of the AVX-512 level: the
// table's chain puts them first where the policy's amx is Hardware and cpu_has_amx() (the CPU
// probe found AMX, the OS granted the tile data and the self-test below passed), or Emulate (the
// same kernels over amx_tiles.h's scalar emulation, on any AVX-512 CPU, for tests).
//
// Q8_0:
// Per group of m <= 16 tokens and per block pair of the tile: for each of the two blocks, C = 0,
// A = the m tokens' 32 activation bytes of the block (rows of the Q8_0 activations, stride the
// row stride), B = the block's 8 lines (8 rows of 64 bytes: line g holds columns 4g..4g+3 of the
// 16 weight rows, unsigned q + 128), C += A . B (TDPBSUD): C[t][r] = sum a * (q + 128), exact.
// Then on AVX-512, as the VNNI tile kernel (avx512/gemm_q8.cpp) does per token:
// isum = C[t] + corr[t][b] (= the exact dot product), acc[t] = fma(float(isum), d_w * d_a, acc[t])
// in block order; the same operations, so the same bits.
//
// Q4_K (kernels/layout/repack_k.h), per group and super-block: the mins term as the VNNI kernel
// (avx512/q4k_steps.h); then per 32-element sub-block s, the 4 quant lines' nibbles are spread on
// AVX-512 into an 8 x 64-byte B tile (row 2i: the low nibbles of line 4s + i, elements 8i..8i+3
// of the sub-block; row 2i + 1: the high ones, 8i+4..8i+7), A = the m tokens' 32 activation bytes
// of the sub-block (stride 256 in kq_prepare_acts's layout), C = A . B is the exact sub-block dot
// product, isum[t] += sc_s * C[t]; then acc = fma(float(isum), d_w * d_a, acc): the VNNI kernel's
// integers and float steps, so its bits.
//
// Not here: Q6_K (the same scheme would work: its 6-bit values spread into B tiles, 16-element
// groups as K = 16 half tiles; not written yet). F16 / BF16: F16 weights would lose 3 mantissa
// bits as BF16, and TDPBF16PS's documented order (even element, then odd, one rounding each)
// differs from vdpbf16ps's (odd first) and from the FMA panels, so a BF16 AMX kernel would have
// to take the one-token passes too for batch invariance: a choice to make on hardware.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/amx/amx_tiles.h"
#include "kernels/avx512/q4k_steps.h"
#include "kernels/avx512/tile512.h"
#include "kernels/isa_parts.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/repack_k.h"
#include "kernels/matmul.h"
#include "kernels/quants.h"
#include "kernels/repack.h"
#include "kernels/x86/token_groups.h"

// GCC 12 flags the undefined source operand of _mm512_cvtph_ps / _mm512_cvtepi32_ps.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specula {

namespace simd {

namespace {

// Fewer tokens run on the VNNI tile kernel (same bits): the tile loads, stores and TDPBSUD cost
// the same for 1 or 16 rows of A, and the float steps per (token, block) are the same work on
// either path. Measured on an Intel Xeon with AMX (2 cores of a VM, bench_kernels'
// BM_matmul_packed_amx_hot, a cache-resident 512 x 2048 matrix on one thread): Q8_0 on AMX was
// slower at 5 tokens (45-68 against 32-45 us) and even at 9, 7-25% faster at 16, 64 and 512;
// Q4_K on AMX 2x slower at 5 and 9 tokens and within the noise of VNNI at 16 to 512.
constexpr int kAmxMinTokens = 16;
constexpr int kAheadPairs = 8;  // block pairs to prefetch ahead, as the VNNI kernel

// The AVX-512 VNNI tile kernels the AMX ones hand passes of fewer than kAmxMinTokens tokens to
// (the same bits), from the table at registration (register_amx runs after register_avx512).
PackedTileFn vnni_q8_0 = nullptr;
PackedTileFn vnni_q4_K = nullptr;

// Tiles: C of blocks 2j / 2j+1 in tmm0 / tmm1, their A in tmm2 / tmm3, their B in tmm4 / tmm5.
TileConfig config_for(int m) {
    TileConfig c;
    for (int i = 0; i < 2; ++i) {
        c.rows[i] = static_cast<uint8_t>(m), c.colsb[i] = 64;          // C: m x 16 int32
        c.rows[2 + i] = static_cast<uint8_t>(m), c.colsb[2 + i] = 32;  // A: m x 32 bytes
        c.rows[4 + i] = 8, c.colsb[4 + i] = 64;                        // B: 8 x 64 bytes
    }
    return c;
}

// The hardware's configuration is kept per thread while m stays the same (nothing else in the
// process configures tiles); the emulation is configured every time (a test may have changed it).
template <class Ops>
void configure(int m) {
    if constexpr (std::is_same_v<Ops, AmxHw>) {
        thread_local int configured = 0;  // the m this thread's tiles are configured for
        if (configured == m) return;
        configured = m;
    }
    Ops::configure(config_for(m));
}

// Rows lo..hi-1 of the tile for m (1..16) tokens. Software-pipelined: the tiles of block pair
// j + 1 are multiplied and stored before the float steps read pair j's sums, so the vector loads
// never wait on a tile store that has just been issued (a tile store is not forwarded to loads).
template <class Ops>
void amx_group(const uint8_t* tile, const PackedActs& a, int m, int lo, int hi, float* y,
               int64_t ldy) {
    configure<Ops>(m);
    alignas(64) int32_t c[2][2][16][16];  // [pair parity][block of the pair][token][row]
    __m512 acc[16];
    for (int t = 0; t < m; ++t) acc[t] = _mm512_setzero_ps();
    const uint8_t* q0 = a.q + 2;  // token 0's block 0 quants, after its fp16 scale
    const int64_t npairs = (a.nb + 1) / 2;
    auto multiply = [&](int64_t j) {
        const int64_t b = 2 * j;
        const uint8_t* pair = tile + j * kPackPairBytes;
        const char* pf = reinterpret_cast<const char*>(pair) + kAheadPairs * kPackPairBytes;
        for (int l = 0; l < 17; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        Ops::template zero<0>();
        Ops::template load<2>(q0 + b * sizeof(block_q8_0), a.stride);
        Ops::template load<4>(pair + 64, 64);
        Ops::template dpbsud<0, 2, 4>();
        Ops::template store<0>(c[j & 1][0], 64);
        if (b + 1 < a.nb) {
            Ops::template zero<1>();
            Ops::template load<3>(q0 + (b + 1) * sizeof(block_q8_0), a.stride);
            Ops::template load<5>(pair + 64 + 512, 64);
            Ops::template dpbsud<1, 3, 5>();
            Ops::template store<1>(c[j & 1][1], 64);
        }
    };
    multiply(0);
    for (int64_t j = 0; j < npairs; ++j) {
        if (j + 1 < npairs) multiply(j + 1);
        const uint8_t* pair = tile + j * kPackPairBytes;
        const int nblk = 2 * j + 1 < a.nb ? 2 : 1;
        for (int h = 0; h < nblk; ++h) {
            const int64_t bb = 2 * j + h;
            const __m512 dw =
                _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pair + h * 32)));
            for (int t = 0; t < m; ++t) {
                const __m512i s = _mm512_add_epi32(_mm512_load_si512(c[j & 1][h][t]),
                                                   _mm512_set1_epi32(a.corr[t * a.nb + bb]));
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(a.d[t * a.nb + bb]));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[t]);
            }
        }
    }
    store_rows(acc, m, lo, hi, y, ldy);
}

// The PackedTileFn: balanced groups of at most 16 tokens (token_groups); fewer than
// kAmxMinTokens tokens on the VNNI tile kernel.
template <class Ops>
void amx_tile(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
              int64_t ldy) {
    if (ntok < kAmxMinTokens) return vnni_q8_0(tile, a, ntok, lo, hi, y, ldy);
    token_groups<16>(a, ntok, [&](auto m, const PackedActs& at, int t) {
        amx_group<Ops>(tile, at, m(), lo, hi, y + t * ldy, ldy);
    });
}

// Rows lo..hi-1 of a packed Q4_K tile for m (1..16) tokens. The tiles of a Q8_0 block serve:
// C in tmm0, A in tmm2 (m x 32 bytes), B in tmm4 (8 x 64 bytes). Pipelined as amx_group, over
// the sub-blocks of all super-blocks: sub-block k + 1's nibbles are spread, multiplied and its sums
// stored (double-buffered) before sub-block k's sums are read.
template <class Ops>
void q4k_group(const uint8_t* tile, const PackedActs& a, int m, int lo, int hi, float* y,
               int64_t ldy) {
    configure<Ops>(m);
    alignas(64) uint8_t bt[2][8][64];
    alignas(64) int32_t c[2][16][16];
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512 acc[16];
    for (int t = 0; t < m; ++t) acc[t] = _mm512_setzero_ps();
    const int64_t nsub = a.nb * 8;
    auto multiply = [&](int64_t k) {
        const int64_t b = k >> 3, s = k & 7;
        const uint8_t* sb = tile + b * kQ4KSuperBytes;
        for (int i = 0; i < 4; ++i) {
            const __m512i raw = _mm512_load_si512(sb + 320 + 64 * (4 * s + i));
            _mm512_store_si512(bt[k & 1][2 * i], _mm512_and_si512(raw, low4));
            _mm512_store_si512(bt[k & 1][2 * i + 1],
                               _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4));
        }
        Ops::template zero<0>();
        Ops::template load<2>(ActsAt(a, b).q + 32 * s, 256);
        Ops::template load<4>(bt[k & 1], 64);
        Ops::template dpbsud<0, 2, 4>();
        Ops::template store<0>(c[k & 1], 64);
    };
    multiply(0);
    for (int64_t b = 0; b < a.nb; ++b) {
        const uint8_t* sb = tile + b * kQ4KSuperBytes;
        for (size_t o = 0; o < kQ4KSuperBytes; o += 64)
            _mm_prefetch(reinterpret_cast<const char*>(sb) + 8192 + o, _MM_HINT_T0);
        const ActsAt x(a, b);
        q4k_mins(sb, x, m, acc);
        __m512i isum[16];
        for (int t = 0; t < m; ++t) isum[t] = _mm512_setzero_si512();
        for (int s = 0; s < 8; ++s) {
            const int64_t k = b * 8 + s;
            if (k + 1 < nsub) multiply(k + 1);
            const __m512i sc = _mm512_cvtepu8_epi32(
                _mm_load_si128(reinterpret_cast<const __m128i*>(sb + 64 + 16 * s)));
            for (int t = 0; t < m; ++t) {
                isum[t] = _mm512_add_epi32(isum[t],
                                           _mm512_mullo_epi32(_mm512_load_si512(c[k & 1][t]), sc));
            }
        }
        q4k_finish(sb, x, m, isum, acc);
    }
    store_rows(acc, m, lo, hi, y, ldy);
}

template <class Ops>
void q4k_tile(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
              int64_t ldy) {
    if (ntok < kAmxMinTokens) return vnni_q4_K(tile, a, ntok, lo, hi, y, ldy);
    kq_token_groups<16>(a, ntok, [&](auto m, const PackedActs& at, int t) {
        q4k_group<Ops>(tile, at, m(), lo, hi, y + t * ldy, ldy);
    });
}

}  // namespace

}  // namespace simd

namespace {

// The permission to use the tile data (the CPU probe, kernels/cpu.h, found AMX-TILE, AMX-INT8
// and the OS saving the tile state).
bool request_tile_data() {
#if defined(__x86_64__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

// A packed random 16-row matrix of type t and kTok tokens of activations in the layout its
// kernels read.
constexpr int kTestTokens = 20;
struct TestCase {
    std::vector<uint8_t> rowwise;
    std::unique_ptr<PackedBuffer> packed;
    MatmulScratch scratch;
    std::vector<float> d;
    std::vector<int32_t> corr;
    std::vector<uint8_t> q;
    PackedActs acts;
};
void make_case(GGMLType t, int64_t cols, TestCase& c) {
    constexpr int64_t rows = 16;
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> w(rows * cols), x(kTestTokens * cols);
    for (float& v : w) v = u(rng);
    for (float& v : x) v = u(rng);
    const size_t rb = row_size(t, cols);
    c.rowwise.resize(rb * rows);
    if (t == GGMLType::Q8_0) {
        for (int64_t r = 0; r < rows; ++r)
            quantize_row(t, w.data() + r * cols, c.rowwise.data() + r * rb, cols);
    } else {
        // Q4_K has no quantizer at this layer (quantize_row takes the simple types): random
        // scales, mins and nibbles with small positive super-block scales.
        std::uniform_int_distribution<int> byte(0, 255);
        for (uint8_t& v : c.rowwise) v = static_cast<uint8_t>(byte(rng));
        for (size_t off = 0; off < c.rowwise.size(); off += sizeof(block_q4_K)) {
            auto* blk = reinterpret_cast<block_q4_K*>(c.rowwise.data() + off);
            blk->d = fp32_to_fp16(0.002f + 0.01f * (u(rng) + 1.f));
            blk->dmin = fp32_to_fp16(0.001f + 0.005f * (u(rng) + 1.f));
        }
    }
    const WeightView W{t, rows, cols, c.rowwise.data()};
    c.packed = std::make_unique<PackedBuffer>(packed_size(W));
    repack(W, c.packed->data());
    const size_t stride = quantize_acts(t, x.data(), cols, cols, kTestTokens, c.scratch);
    c.acts = packed_acts(t, c.scratch.acts.data(), stride, cols, kTestTokens, c.d, c.corr, c.q);
}

// The kernels over Ops against the references (a Q8_0 16 x 96 matrix, an odd block count; a
// Q4_K 16 x 512 one) for 1..20 tokens and two row ranges.
template <class Ops>
bool kernels_match() {
    for (auto [t, cols, ref, fn] :
         {std::tuple{GGMLType::Q8_0, int64_t{96}, &packed_tile_ref, &simd::amx_tile<Ops>},
          std::tuple{GGMLType::Q4_K, int64_t{512}, &kq_tile_ref_q4_K, &simd::q4k_tile<Ops>}}) {
        TestCase c;
        make_case(t, cols, c);
        std::vector<float> want(kTestTokens * 16), got(kTestTokens * 16);
        for (int ntok = 1; ntok <= kTestTokens; ++ntok) {
            for (auto [lo, hi] : {std::pair{0, 16}, std::pair{3, 11}}) {
                ref(c.packed->data(), c.acts, ntok, lo, hi, want.data(), 16);
                fn(c.packed->data(), c.acts, ntok, lo, hi, got.data(), 16);
                for (int k = 0; k < ntok; ++k) {
                    if (std::memcmp(&want[k * 16], &got[k * 16], (hi - lo) * sizeof(float)) != 0)
                        return false;
                }
            }
        }
    }
    return true;
}

}  // namespace

namespace amx {

bool self_test(bool emulated) {
    return emulated ? kernels_match<simd::AmxEmu>() : kernels_match<simd::AmxHw>();
}

bool grant_and_self_test() {
    if (!request_tile_data()) return false;
    try {
        if (self_test(false)) return true;
        std::fprintf(stderr,
                     "warning: the AMX tile kernel differs from the reference on this CPU; "
                     "running on AVX-512 without AMX\n");
    } catch (const std::exception& e) {
        // A self-test that cannot run is a failed one: AMX off, never the command.
        std::fprintf(stderr,
                     "warning: the AMX self-test failed (%s); running on AVX-512 without AMX\n",
                     e.what());
    }
    return false;
}

}  // namespace amx

void register_amx(KernelTable& t) {
    simd::vnni_q8_0 = t.find(GGMLType::Q8_0, Layout::Packed, Isa::AVX512, TokenClass::Any)->tile;
    simd::vnni_q4_K = t.find(GGMLType::Q4_K, Layout::Packed, Isa::AVX512, TokenClass::Any)->tile;
    for (auto [isa, q8, q4k] :
         {std::tuple{Isa::AMX, &simd::amx_tile<simd::AmxHw>, &simd::q4k_tile<simd::AmxHw>},
          std::tuple{Isa::AMXEmulated, &simd::amx_tile<simd::AmxEmu>,
                     &simd::q4k_tile<simd::AmxEmu>}}) {
        t.add(GGMLType::Q8_0, Layout::Packed, isa, TokenClass::Any).tile = q8;
        t.add(GGMLType::Q4_K, Layout::Packed, isa, TokenClass::Any).tile = q4k;
        // No pair kernel: the tile kernel takes prompt-sized passes itself.
        t.add(GGMLType::Q8_0, Layout::Packed, isa, TokenClass::Many);
    }
}

}  // namespace specula
