// The AMX tile kernels for packed Q8_0 and Q4_K weights (kernels/amx/gemm_amx.cpp) give the
// reference kernels' bits (packed_tile_ref, kq_tile_ref_q4_K) for every token count (1..40), row
// range and shape, alone, through matmul (any thread count) and through a whole model (logits equal
// to the AVX-512 level's, so greedy speculative output stays equal to plain output with AMX on).
// Each check runs the kernel over the scalar emulation of the tile instructions on every AVX-512
// CPU, and on the instructions themselves where the CPU has AMX; the emulation also faults on the
// tile shapes the hardware would refuse. The switches: the kernel policy's SIMD cap and AMX mode
// (SPECULA_SIMD=amx|avx512, SPECULA_AMX=0|emulate).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernel_test_util.h"
#include "kernels/amx/amx_tiles.h"
#include "kernels/cpu.h"
#include "kernels/isa_parts.h"
#include "kernels/layout/repack_k.h"
#include "kernels/matmul.h"
#include "kernels/policy.h"
#include "kernels/table.h"
#include "model/session.h"
#include "packed_test_util.h"
#include "test_util.h"

using namespace specula;
using specula::test::make_packed;
using specula::test::Packed;
using specula::test::random_floats;
using specula::test::run;
using specula::test::same_bits;

namespace {

bool has_avx512() {
    return cpu_simd_level() >= SimdLevel::AVX512;
}

// The kernel policy with the SIMD level capped at `cap` and AMX in mode m.
KernelPolicy policy(SimdLevel cap, AmxMode m) {
    KernelPolicy p = kernel_policy();
    p.simd_cap = cap;
    p.amx = m;
    return p;
}

// The kernels to check on this CPU: the emulated ones (AVX-512 CPUs) and the hardware ones (AMX
// CPUs), each with the AMX mode that makes matmul use them.
struct Variant {
    const char* name;
    bool emulated;
    AmxMode mode;
    PackedTileFn fn(GGMLType t) const {
        return packed_tile_at(t, emulated ? Isa::AMXEmulated : Isa::AMX);
    }
};
std::vector<Variant> variants() {
    std::vector<Variant> v;
    if (has_avx512()) v.push_back({"emulated", true, AmxMode::Emulate});
    if (cpu_has_amx()) v.push_back({"hardware", false, AmxMode::Hardware});
    return v;
}

constexpr GGMLType kTypes[] = {GGMLType::Q8_0, GGMLType::Q4_K};

// Shapes: one block, an odd block count, whole and partial tiles, a 2048-column row (Q8_0); one
// and several super-blocks (Q4_K).
std::vector<std::pair<int64_t, int64_t>> shapes(GGMLType t) {
    if (t == GGMLType::Q4_K) return {{16, 256}, {21, 512}, {33, 2048}};
    return {{16, 32}, {5, 96}, {37, 160}, {33, 2048}};
}

// ntok tokens of activations for packed weights of type t, as matmul prepares them.
struct Acts {
    MatmulScratch scratch;
    std::vector<float> d;
    std::vector<int32_t> corr;
    std::vector<uint8_t> q;
    PackedActs a;
};
void prepare(GGMLType t, const std::vector<float>& x, int64_t cols, int ntok, Acts& out) {
    const size_t stride = quantize_acts(t, x.data(), cols, cols, ntok, out.scratch);
    out.a = packed_acts(t, out.scratch.acts.data(), stride, cols, ntok, out.d, out.corr, out.q);
}

PackedTileFn reference(GGMLType t) {
    return t == GGMLType::Q4_K ? &kq_tile_ref_q4_K : &packed_tile_ref;
}

}  // namespace

TEST(Amx, TileKernelEqualsReference) {
    if (variants().empty()) GTEST_SKIP() << "needs AVX-512 (for the emulated AMX kernel)";
    for (const Variant& v : variants()) {
        for (GGMLType type : kTypes) {
            if (type == GGMLType::Q4_K && !cpu_features().avx512vbmi) continue;  // not registered
            for (auto [rows, cols] : shapes(type)) {
                Packed p = make_packed(type, rows, cols, 17 + static_cast<uint32_t>(cols));
                constexpr int kMax = 40;
                std::mt19937 rng(9);
                const std::vector<float> x = random_floats(rng, kMax * cols);
                Acts acts;
                prepare(type, x, cols, kMax, acts);
                const size_t tb = packed_tile_bytes(type, cols);
                for (int ntok = 1; ntok <= kMax; ++ntok) {
                    for (auto [lo, hi] : {std::pair{0, 16}, std::pair{0, 5}, std::pair{7, 16}}) {
                        SCOPED_TRACE(testing::Message()
                                     << v.name << " " << type_name(type) << " " << rows << "x"
                                     << cols << " ntok " << ntok << " rows " << lo << ".." << hi);
                        for (int64_t tile = 0; tile * 16 < rows; ++tile) {
                            std::vector<float> want(ntok * 16, NAN), got(ntok * 16, NAN);
                            reference(type)(p.W.packed + tile * tb, acts.a, ntok, lo, hi,
                                            want.data(), 16);
                            v.fn(type)(p.W.packed + tile * tb, acts.a, ntok, lo, hi, got.data(),
                                       16);
                            ASSERT_TRUE(same_bits(want, got)) << "tile " << tile;
                        }
                    }
                }
            }
        }
    }
}

TEST(Amx, MatmulEqualsAvx512AtEveryTokenCountAndThreadCount) {
    if (variants().empty()) GTEST_SKIP() << "needs AVX-512 (for the emulated AMX kernel)";
    for (const Variant& v : variants())
        for (GGMLType type : kTypes) {
            for (auto [rows, cols] : shapes(type)) {
                SCOPED_TRACE(testing::Message()
                             << v.name << " " << type_name(type) << " " << rows << "x" << cols);
                Packed p = make_packed(type, rows, cols, 5 + static_cast<uint32_t>(rows));
                std::mt19937 rng(4);
                const std::vector<float> x = random_floats(rng, 64 * cols);
                std::vector<float> base;
                {
                    const ScopedKernelPolicy avx512(policy(SimdLevel::AVX512, AmxMode::Off));
                    EXPECT_FALSE(amx_active());
                    base = run(p.W, x, 64, 2);
                }
                const ScopedKernelPolicy amx(policy(SimdLevel::AVX512, v.mode));
                ASSERT_TRUE(amx_active());
                for (int n : {1, 2, 3, 4, 5, 9, 16, 17, 33, 40, 64}) {
                    for (int threads : {1, 2, 3}) {
                        const std::vector<float> y = run(p.W, x, n, threads);
                        ASSERT_EQ(0, std::memcmp(y.data(), base.data(), y.size() * sizeof(float)))
                            << "ntok " << n << " threads " << threads;
                    }
                }
            }
        }
}

TEST(Amx, ModelLogitsEqualAvx512) {
    if (variants().empty()) GTEST_SKIP() << "needs AVX-512 (for the emulated AMX kernel)";
    // Q8_0, and Q4_K_M (Q4_K matrices on AMX, Q6_K ones on AVX-512 in the same pass).
    for (const char* stem :
         {"rand-llama-tok512-d256-l2-Q8_0", "rand-llama-tok512-d256-l2-Q4_K_M"}) {
        SCOPED_TRACE(stem);
        auto model =
            Model::load(test::shared_path(std::string("models/synthetic/") + stem + ".gguf"));
        const std::vector<token_id> toks = {1, 15, 200, 7, 99, 300, 42, 11, 5, 480, 63, 2};
        auto logits = [&](bool one_by_one) {
            Session s(*model, SessionParams{64, 2});
            std::vector<float> out;
            const int nv = model->hparams().n_vocab;
            if (one_by_one) {
                for (token_id t : toks) {
                    s.eval(std::span(&t, 1), true);
                    out.insert(out.end(), s.logits(0), s.logits(0) + nv);
                }
            } else {
                s.eval(toks, true);
                for (int i = 0; i < s.n_logits(); ++i)
                    out.insert(out.end(), s.logits(i), s.logits(i) + nv);
            }
            return out;
        };
        std::vector<float> base;
        {
            const ScopedKernelPolicy avx512(policy(SimdLevel::AVX512, AmxMode::Off));
            base = logits(true);
        }
        for (const Variant& v : variants()) {
            SCOPED_TRACE(v.name);
            const ScopedKernelPolicy amx(policy(SimdLevel::AVX512, v.mode));
            ASSERT_TRUE(amx_active());
            EXPECT_TRUE(same_bits(base, logits(false))) << "a 12-token pass";
            EXPECT_TRUE(same_bits(base, logits(true))) << "12 one-token passes";
        }
    }
}

// The self-test that decides at the first use whether the hardware kernels may run: it runs to
// a verdict (it once threw on a weight type it could not make, and every command failed on AMX
// CPUs), over the emulation on any AVX-512 CPU and over the tiles where the CPU has them.
TEST(Amx, SelfTestPasses) {
    if (!has_avx512()) GTEST_SKIP() << "needs AVX-512 (for the emulated AMX kernel)";
    EXPECT_TRUE(amx::self_test(true));
    if (cpu_has_amx()) EXPECT_TRUE(amx::self_test(false));
}

TEST(Amx, Switches) {
    {
        const ScopedKernelPolicy amx(policy(SimdLevel::AVX512, AmxMode::Hardware));
        EXPECT_EQ(active_simd_level(), cpu_simd_level());  // `amx` caps nothing
        EXPECT_EQ(amx_active(), cpu_has_amx());
    }
    {
        const ScopedKernelPolicy off(policy(SimdLevel::AVX512, AmxMode::Off));
        EXPECT_FALSE(amx_active());
        if (has_avx512()) {
            EXPECT_EQ(best_packed_tile(GGMLType::Q8_0),
                      packed_tile_at(GGMLType::Q8_0, Isa::AVX512));
        }
    }
    {
        const ScopedKernelPolicy avx2(policy(SimdLevel::AVX2, AmxMode::Emulate));
        EXPECT_FALSE(amx_active());  // AMX is part of the AVX-512 level
        EXPECT_NE(best_packed_tile(GGMLType::Q8_0),
                  packed_tile_at(GGMLType::Q8_0, Isa::AMXEmulated));
        EXPECT_NE(best_packed_tile(GGMLType::Q4_K),
                  packed_tile_at(GGMLType::Q4_K, Isa::AMXEmulated));
    }
    if (has_avx512()) {
        const ScopedKernelPolicy emulate(policy(SimdLevel::AVX512, AmxMode::Emulate));
        EXPECT_TRUE(amx_active());
        EXPECT_EQ(best_packed_tile(GGMLType::Q8_0),
                  packed_tile_at(GGMLType::Q8_0, Isa::AMXEmulated));
        EXPECT_EQ(best_packed_tile(GGMLType::Q4_K),
                  packed_tile_at(GGMLType::Q4_K, Isa::AMXEmulated));
        // Q6_K has no AMX kernel: the AVX-512 level's build for this CPU (vpmulld on AMD).
        EXPECT_EQ(
            best_packed_tile(GGMLType::Q6_K),
            packed_tile_at(GGMLType::Q6_K, kq_mulld_at_avx512() ? Isa::AVX512Mulld : Isa::AVX512));
        EXPECT_EQ(packed_tile_at(GGMLType::Q6_K, Isa::AMXEmulated), nullptr);
        EXPECT_EQ(best_packed_pair(GGMLType::Q8_0), nullptr);  // the AMX kernel takes prompts
    }
}

// The emulation refuses what TDPBSUD would fault on: mismatched shapes, oversized tiles.
TEST(Amx, EmulationChecksTileShapes) {
    using simd::AmxEmu;
    using simd::TileConfig;
    TileConfig c;
    c.rows[0] = 4, c.colsb[0] = 64;  // C 4 x 16
    c.rows[1] = 4, c.colsb[1] = 32;  // A 4 x 32 bytes
    c.rows[2] = 8, c.colsb[2] = 64;  // B 8 x 64 bytes
    c.rows[3] = 5, c.colsb[3] = 32;  // an A with the wrong row count
    AmxEmu::configure(c);
    std::vector<uint8_t> a(4 * 32, 1), b(8 * 64, 2);
    std::vector<int32_t> out(4 * 16);
    AmxEmu::zero<0>();
    AmxEmu::load<1>(a.data(), 32);
    AmxEmu::load<2>(b.data(), 64);
    AmxEmu::dpbsud<0, 1, 2>();
    AmxEmu::store<0>(out.data(), 64);
    for (int32_t v : out) EXPECT_EQ(v, 32 * 1 * 2);
    EXPECT_THROW((AmxEmu::dpbsud<0, 3, 2>()), Error);
    TileConfig big;
    big.rows[0] = 17, big.colsb[0] = 64;
    EXPECT_THROW(AmxEmu::configure(big), Error);
}
