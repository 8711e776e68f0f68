// The AMX tile kernel for packed Q8_0 weights (kernels/amx.h), its switches and its self-test.
//
// Per group of m <= 16 tokens and per block pair of the tile: for each of the two blocks, C = 0,
// A = the m tokens' 32 activation bytes of the block (rows of the Q8_0 activations, stride the
// row stride), B = the block's 8 lines (8 rows of 64 bytes: line g holds columns 4g..4g+3 of the
// 16 weight rows, unsigned q + 128), C += A . B (TDPBSUD): C[t][r] = sum a * (q + 128), exact.
// Then on AVX-512, as the VNNI tile kernel (gemm_q8_avx512.cpp) does per token:
// isum = C[t] + corr[t][b] (= the exact dot product), acc[t] = fma(float(isum), d_w * d_a, acc[t])
// in block order; the same operations, so the same bits.
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/amx.h"
#include "kernels/amx_tiles.h"
#include "kernels/blocks.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/packed_kernels.h"
#include "kernels/quants.h"
#include "kernels/tile512.h"

// GCC 12 flags the undefined source operand of _mm512_cvtph_ps / _mm512_cvtepi32_ps.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specula {

namespace simd {

namespace {

// Fewer tokens run on the VNNI tile kernel (same bits): a TDPBSUD costs the same for 1 or 16
// rows of A, and with few tokens a pass is bound by memory either way. An estimate: no CPU this
// project has run on so far exposed AMX, so this threshold is not measured.
constexpr int kAmxMinTokens = 4;
constexpr int kAheadPairs = 8;  // block pairs to prefetch ahead, as the VNNI kernel

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
    thread_local int configured = 0;  // the m this thread's tiles are configured for
    if (std::is_same_v<Ops, AmxHw> && configured == m) return;
    const TileConfig c = config_for(m);
    Ops::configure(c);
    configured = m;
}

// Rows lo..hi-1 of the tile for m (1..16) tokens.
template <class Ops>
void amx_group(const uint8_t* tile, const PackedActs& a, int m, int lo, int hi, float* y,
               int64_t ldy) {
    configure<Ops>(m);
    alignas(64) int32_t c[2][16][16];
    __m512 acc[16];
    for (int t = 0; t < m; ++t) acc[t] = _mm512_setzero_ps();
    const uint8_t* q0 = a.q + 2;  // token 0's block 0 quants, after its fp16 scale
    for (int64_t b = 0; b < a.nb; b += 2) {
        const uint8_t* pair = tile + (b >> 1) * kPackPairBytes;
        const char* pf = reinterpret_cast<const char*>(pair) + kAheadPairs * kPackPairBytes;
        for (int l = 0; l < 17; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        const int nblk = b + 1 < a.nb ? 2 : 1;
        Ops::template zero<0>();
        Ops::template load<2>(q0 + b * sizeof(block_q8_0), a.stride);
        Ops::template load<4>(pair + 64, 64);
        Ops::template dpbsud<0, 2, 4>();
        if (nblk == 2) {
            Ops::template zero<1>();
            Ops::template load<3>(q0 + (b + 1) * sizeof(block_q8_0), a.stride);
            Ops::template load<5>(pair + 64 + 512, 64);
            Ops::template dpbsud<1, 3, 5>();
        }
        Ops::template store<0>(c[0], 64);
        if (nblk == 2) Ops::template store<1>(c[1], 64);
        for (int h = 0; h < nblk; ++h) {
            const int64_t bb = b + h;
            const __m512 dw =
                _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pair + h * 32)));
            for (int t = 0; t < m; ++t) {
                const __m512i s = _mm512_add_epi32(_mm512_load_si512(c[h][t]),
                                                   _mm512_set1_epi32(a.corr[t * a.nb + bb]));
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(a.d[t * a.nb + bb]));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[t]);
            }
        }
    }
    store_rows(acc, m, lo, hi, y, ldy);
}

// The PackedTileFn: balanced groups of at most 16 tokens; a group of fewer than kAmxMinTokens
// (only when ntok itself is that small) on the VNNI tile kernel.
template <class Ops>
void amx_tile(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
              int64_t ldy) {
    if (ntok < kAmxMinTokens) return avx512_packed_tile()(tile, a, ntok, lo, hi, y, ldy);
    for (int t = 0; t < ntok;) {
        const int left = ntok - t, groups = (left + 15) / 16;
        const int m = (left + groups - 1) / groups;
        PackedActs at = a;
        at.q += t * a.stride;
        at.d += t * a.nb;
        at.corr += t * a.nb;
        amx_group<Ops>(tile, at, m, lo, hi, y + t * ldy, ldy);
        t += m;
    }
}

}  // namespace

}  // namespace simd

namespace {

// CPUID: AMX-TILE (leaf 7 EDX bit 24) and AMX-INT8 (bit 25); XCR0: the OS saves the tile
// configuration and data (bits 17, 18); then the permission to use the tile data.
bool probe_amx() {
#if defined(__x86_64__) && !defined(SPECULA_NO_CPU_PROBE)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 0, a, b, c, d);
    if (!(d & (1u << 24)) || !(d & (1u << 25))) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

// The hardware kernel against packed_tile_ref on a random 16 x 96 matrix (an odd block count)
// for 1..20 tokens and two row ranges: any difference turns AMX off.
bool self_test() {
    constexpr int64_t rows = 16, cols = 96;
    constexpr int kTok = 20;
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> w(rows * cols), x(kTok * cols);
    for (float& v : w) v = u(rng);
    for (float& v : x) v = u(rng);
    std::vector<uint8_t> rowwise(row_size(GGMLType::Q8_0, cols) * rows);
    for (int64_t r = 0; r < rows; ++r)
        quantize_row(GGMLType::Q8_0, w.data() + r * cols,
                     rowwise.data() + r * row_size(GGMLType::Q8_0, cols), cols);
    const WeightView W{GGMLType::Q8_0, rows, cols, rowwise.data()};
    PackedBuffer packed(packed_size(W));
    repack(W, packed.data());
    MatmulScratch scratch;
    const size_t stride = quantize_acts(GGMLType::Q8_0, x.data(), cols, cols, kTok, scratch);
    const int64_t nb = cols / QK8_0;
    std::vector<float> d(nb * kTok);
    std::vector<int32_t> corr(nb * kTok);
    packed_act_sums(scratch.acts.data(), stride, nb, kTok, d.data(), corr.data());
    const PackedActs acts{scratch.acts.data(), stride, d.data(), corr.data(), nb};
    std::vector<float> want(kTok * rows), got(kTok * rows);
    for (int ntok = 1; ntok <= kTok; ++ntok) {
        for (auto [lo, hi] : {std::pair{0, 16}, std::pair{3, 11}}) {
            packed_tile_ref(packed.data(), acts, ntok, lo, hi, want.data(), rows);
            simd::amx_tile<simd::AmxHw>(packed.data(), acts, ntok, lo, hi, got.data(), rows);
            for (int t = 0; t < ntok; ++t) {
                if (std::memcmp(&want[t * rows], &got[t * rows], (hi - lo) * sizeof(float)) != 0)
                    return false;
            }
        }
    }
    return true;
}

enum class AmxMode { Hardware, Emulate, Off };

AmxMode env_mode() {
    const char* e = std::getenv("SPECULA_AMX");
    if (e && std::strcmp(e, "0") == 0) return AmxMode::Off;
    if (e && std::strcmp(e, "emulate") == 0) return AmxMode::Emulate;
    const char* s = std::getenv("SPECULA_SIMD");  // a cap below `amx` turns it off
    if (s && *s && std::strcmp(s, "amx") != 0) return AmxMode::Off;
    return AmxMode::Hardware;
}

}  // namespace

bool cpu_has_amx() {
    static const bool ok = [] {
        if (cpu_simd_level() < SimdLevel::AVX512 || !probe_amx()) return false;
        if (self_test()) return true;
        std::fprintf(stderr,
                     "warning: the AMX tile kernel differs from the reference on this CPU; "
                     "running on AVX-512 without AMX\n");
        return false;
    }();
    return ok;
}

bool amx_active() {
    if (active_simd_level() != SimdLevel::AVX512) return false;
    switch (env_mode()) {
        case AmxMode::Off:
            return false;
        case AmxMode::Emulate:
            return true;
        case AmxMode::Hardware:
            return cpu_has_amx();
    }
    return false;
}

PackedTileFn amx_packed_tile() {
    return &simd::amx_tile<simd::AmxHw>;
}

PackedTileFn amx_packed_tile_emulated() {
    return &simd::amx_tile<simd::AmxEmu>;
}

PackedTileFn best_amx_packed_tile() {
    if (!amx_active()) return nullptr;
    return env_mode() == AmxMode::Emulate ? amx_packed_tile_emulated() : amx_packed_tile();
}

}  // namespace specula
