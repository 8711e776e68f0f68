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
// Q4_K (kernels/layout/repack_k.h), for passes of kAmxMinTokensQ4K tokens or more: a sub-block
// scale sc (6 bits) is hi * 8 + lo with hi, lo in 0..7, so the exact integer sum of the VNNI
// kernel, sum_s sc_s * dot_s, is 8 * C_hi + C_lo where C_x sums a * (q * x_s) over the whole
// super-block; the bytes q * hi and q * lo (<= 105) come from a 128-entry table lookup (vpermi2b,
// hence AVX-512 VBMI), so each TDPBSUD takes 64 elements and a super-block's sums are stored once
// (a product and a store per 32-element sub-block, each scaled on AVX-512, was no faster than the
// VNNI kernel at any token count). The mins term and the float steps are the VNNI kernel's
// (avx512/q4k_steps.h), so its bits.
//
// Not here: Q6_K (its signed 8-bit group scales do not split into two table lookups as Q4_K's;
// a product per 16-element group costs what Q4_K's per sub-block did). F16 / BF16: F16 weights
// would lose 3 mantissa bits as BF16, and TDPBF16PS's documented order (even element, then odd, one
// rounding each) differs from vdpbf16ps's (odd first) and from the FMA panels, so a BF16 AMX kernel
// would have to take the one-token passes too for batch invariance: a choice to make on hardware.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
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
#include "kernels/cpu.h"
#include "kernels/isa_parts.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/repack_k.h"
#include "kernels/matmul.h"
#include "kernels/quants.h"
#include "kernels/repack.h"
#include "kernels/x86/token_groups.h"

// GCC 12 flags the undefined source operand of _mm512_cvtph_ps / _mm512_cvtepi32_ps ...
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // and of _mm512_broadcast_i32x4, vpermb

namespace specula {

namespace simd {

namespace {

// Fewer tokens run on the VNNI tile kernel (same bits): the tile loads, stores and TDPBSUD cost
// the same for 1 or 16 rows of A, and the float steps per (token, block) are the same work on
// either path. Measured on an Intel Xeon with AMX (2 cores of a VM, bench_kernels'
// BM_matmul_packed_amx_hot, a cache-resident 512 x 2048 matrix on one thread): Q8_0 on AMX was
// slower at 5 tokens (45-68 against 32-45 us) and even at 9, 7-25% faster at 16, 64 and 512.
// Q4_K (medians of 7): 9 tokens 109 against 92 us, 16 125 / 133, 64 532 / 523, 512 3956 / 6166;
// an 8B-shaped Q4_K_M file's pp512 +7-17%, its 9-token pass slower on AMX: prompt-sized calls
// only (matmul.cpp's kernel calls take up to 32 tokens).
constexpr int kAmxMinTokens = 16;
constexpr int kAmxMinTokensQ4K = 32;
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

TileConfig q4k_config(int m);

// The hardware's configuration is kept per thread while m stays the same (nothing else in the
// process configures tiles); the emulation is configured every time (a test may have changed it).
template <class Ops>
void configure(int m, bool q4k = false) {
    if constexpr (std::is_same_v<Ops, AmxHw>) {
        thread_local int configured = 0;  // the m (negated for Q4_K) the tiles are configured for
        if (configured == (q4k ? -m : m)) return;
        configured = q4k ? -m : m;
    }
    Ops::configure(q4k ? q4k_config(m) : config_for(m));
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

// Q4_K: tiles 0 / 1 and 2 / 3 hold C_hi / C_lo of two token groups (m x 16 int32), 4 / 5 their
// A of a 64-element chunk (m x 64 bytes), 6 / 7 the chunk's B tiles (16 x 64 bytes) of q * hi and
// q * lo.
TileConfig q4k_config(int m) {
    TileConfig c;
    for (int i = 0; i < 6; ++i) c.rows[i] = static_cast<uint8_t>(m), c.colsb[i] = 64;
    for (int i = 6; i < 8; ++i) c.rows[i] = 16, c.colsb[i] = 64;
    return c;
}

// The products s * q (s 0..7, q 0..15) at byte 16 s + q: the table vpermi2b looks q * hi and
// q * lo up in, indexed by q | s << 4.
struct alignas(64) ProductTable {
    uint8_t v[128];
    ProductTable() {
        for (int i = 0; i < 128; ++i) v[i] = static_cast<uint8_t>((i >> 4) * (i & 15));
    }
};
const ProductTable kProducts;

// A Q4_K super-block's B tiles: [64-element chunk][q * hi, q * lo][B row][byte].
using Q4KB = uint8_t[4][2][16][64];

// Super-block sb's B tiles into bt. A sub-block scale sc (6 bits) is hi * 8 + lo with hi, lo in
// 0..7, and the products q * hi, q * lo (<= 105) are bytes a table lookup (vpermi2b) makes. Line g
// of the packed record gives B rows 2g (its low nibbles) and 2g + 1 (its high ones).
SPECULA_INLINE void q4k_make_b(const uint8_t* sb, Q4KB& bt) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), s3 = _mm512_set1_epi8(0x70);
    const __m512i t0 = _mm512_load_si512(kProducts.v), t1 = _mm512_load_si512(kProducts.v + 64);
    // Bytes 4r .. 4r + 3 of a line are row r's: its sub-block scale's byte, 4 times.
    const __m512i spread4 =
        _mm512_set_epi32(0x0F0F0F0F, 0x0E0E0E0E, 0x0D0D0D0D, 0x0C0C0C0C, 0x0B0B0B0B, 0x0A0A0A0A,
                         0x09090909, 0x08080808, 0x07070707, 0x06060606, 0x05050505, 0x04040404,
                         0x03030303, 0x02020202, 0x01010101, 0x00000000);
    auto lookup = [&](__m512i q, __m512i x) {
        return _mm512_permutex2var_epi8(t0, _mm512_or_si512(q, x), t1);
    };
    for (int s = 0; s < 8; ++s) {
        const __m512i sc = _mm512_permutexvar_epi8(
            spread4, _mm512_broadcast_i32x4(
                         _mm_load_si128(reinterpret_cast<const __m128i*>(sb + 64 + 16 * s))));
        const __m512i xl = _mm512_and_si512(_mm512_slli_epi16(sc, 4), s3);  // lo << 4
        const __m512i xh = _mm512_and_si512(_mm512_slli_epi16(sc, 1), s3);  // hi << 4
        for (int i = 0; i < 4; ++i) {
            const int g = 4 * s + i, r = 2 * (g & 7);
            const __m512i raw = _mm512_load_si512(sb + 320 + 64 * g);
            const __m512i ql = _mm512_and_si512(raw, low4);
            const __m512i qh = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
            _mm512_store_si512(bt[g >> 3][0][r], lookup(ql, xh));
            _mm512_store_si512(bt[g >> 3][0][r + 1], lookup(qh, xh));
            _mm512_store_si512(bt[g >> 3][1][r], lookup(ql, xl));
            _mm512_store_si512(bt[g >> 3][1][r + 1], lookup(qh, xl));
        }
    }
}

// C_hi, C_lo of one super-block for one or two groups of m tokens whose 256 activation bytes
// start at q0 and q1 (stride 256; q1 null for one group), stored to c0[0], c0[1] and c1[0], c1[1]:
// each chunk's two B tiles are loaded once for both groups.
template <class Ops>
SPECULA_INLINE void q4k_multiply(const int8_t* q0, const int8_t* q1, const Q4KB& bt,
                                 int32_t (*c0)[16][16], int32_t (*c1)[16][16]) {
    Ops::template zero<0>();
    Ops::template zero<1>();
    if (q1) Ops::template zero<2>(), Ops::template zero<3>();
    for (int j = 0; j < 4; ++j) {
        Ops::template load<6>(bt[j][0], 64);
        Ops::template load<7>(bt[j][1], 64);
        Ops::template load<4>(q0 + 64 * j, 256);
        if (q1) Ops::template load<5>(q1 + 64 * j, 256);
        Ops::template dpbsud<0, 4, 6>();
        Ops::template dpbsud<1, 4, 7>();
        if (q1) Ops::template dpbsud<2, 5, 6>(), Ops::template dpbsud<3, 5, 7>();
    }
    Ops::template store<0>(c0[0], 64);
    Ops::template store<1>(c0[1], 64);
    if (q1) Ops::template store<2>(c1[0], 64), Ops::template store<3>(c1[1], 64);
}

// Rows lo..hi-1 of a packed Q4_K tile for n (1..64) tokens, as the file's header says. Per
// super-block: its B tiles are made once for every group of 16 tokens (the last group ends at token
// n, overlapping the one before: a token's sums do not depend on its group, and each token takes
// them from one group only); fewer than 16 tokens are one group of n. Software-pipelined:
// super-block b's products are issued, then b + 1's B tiles are made while the tile unit works,
// then b's sums are read (neither vector stores nor tile stores are forwarded to the loads that
// read them).
template <class Ops>
void q4k_tokens(const uint8_t* tile, const PackedActs& a, int n, int lo, int hi, float* y,
                int64_t ldy) {
    const int m = n < 16 ? n : 16, groups = (n + 15) / 16;
    configure<Ops>(m, true);
    alignas(64) Q4KB bt[2];
    alignas(64) int32_t c[4][2][16][16];  // [group][hi, lo][token][row]
    alignas(64) float acc_mem[64][16];
    for (int t = 0; t < n; ++t) _mm512_store_ps(acc_mem[t], _mm512_setzero_ps());
    const int last = n - m;  // the last group's first token
    q4k_make_b(tile, bt[0]);
    for (int64_t b = 0; b < a.nb; ++b) {
        const ActsAt x(a, b);
        for (int g = 0; g < groups; g += 2) {
            const int8_t* q1 =
                g + 1 < groups ? x.from_token(std::min(16 * g + 16, last)).q : nullptr;
            q4k_multiply<Ops>(x.from_token(std::min(16 * g, last)).q, q1, bt[b & 1], c[g],
                              c[g + 1]);
        }
        const uint8_t* sb = tile + b * kQ4KSuperBytes;
        for (size_t o = 0; o < kQ4KSuperBytes; o += 64)
            _mm_prefetch(reinterpret_cast<const char*>(sb) + 8192 + o, _MM_HINT_T0);
        if (b + 1 < a.nb) q4k_make_b(sb + kQ4KSuperBytes, bt[(b + 1) & 1]);
        for (int g = 0; g < groups; ++g) {
            const int first = std::min(16 * g, last), t0 = 16 * g, nt = std::min(16, n - t0);
            const int skip = t0 - first;  // rows of C the group before took
            const ActsAt xt = x.from_token(t0);
            __m512 acc[16];
            for (int t = 0; t < nt; ++t) acc[t] = _mm512_load_ps(acc_mem[t0 + t]);
            q4k_mins(sb, xt, nt, acc);
            __m512i isum[16];
            for (int t = 0; t < nt; ++t) {
                isum[t] =
                    _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[g][0][skip + t]), 3),
                                     _mm512_load_si512(c[g][1][skip + t]));
            }
            q4k_finish(sb, xt, nt, isum, acc);
            for (int t = 0; t < nt; ++t) _mm512_store_ps(acc_mem[t0 + t], acc[t]);
        }
    }
    for (int t = 0; t < n; ++t) {
        const __m512 v = _mm512_load_ps(acc_mem[t]);
        store_rows(&v, 1, lo, hi, y + t * ldy, ldy);
    }
}

// The PackedTileFn: blocks of at most 64 tokens; fewer than kAmxMinTokensQ4K tokens on the VNNI
// tile kernel.
template <class Ops>
void q4k_tile(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
              int64_t ldy) {
    if (ntok < kAmxMinTokensQ4K) return vnni_q4_K(tile, a, ntok, lo, hi, y, ldy);
    for (int t = 0; t < ntok; t += 64) {
        q4k_tokens<Ops>(tile, kq_acts_from(a, t), std::min(64, ntok - t), lo, hi, y + t * ldy, ldy);
    }
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
constexpr int kTestTokens = 40;  // past kAmxMinTokensQ4K
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
        if (t == GGMLType::Q4_K && !cpu_features().avx512vbmi) continue;  // not registered
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
        // The Q4_K kernel's lookups need VBMI (every AMX CPU has it; the emulation may not).
        if (cpu_features().avx512vbmi)
            t.add(GGMLType::Q4_K, Layout::Packed, isa, TokenClass::Any).tile = q4k;
        // No pair kernel: the tile kernel takes prompt-sized passes itself.
        t.add(GGMLType::Q8_0, Layout::Packed, isa, TokenClass::Many);
    }
}

}  // namespace specula
