// Packed Q4_K / Q6_K weights (kernels/layout/repack_k.h): the tiled layout holds the same values as
// the rows; the tile kernels are close to the reference dot products; every level (scalar, AVX2,
// AVX-512) gives the same bits; results are bit-identical whatever the number of tokens (1..17,
// 512), the thread count or the row sub-range; and loaded K-quant models are packed, batch
// invariant, with logits close to the unpacked ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu.h"
#include "kernels/layout/repack_k.h"
#include "kernels/matmul.h"
#include "kernels/policy.h"
#include "kernels/quants.h"
#include "kernels/repack.h"
#include "kernels/table.h"
#include "model/load/model.h"
#include "packed_test_util.h"
#include "test_util.h"

using namespace specula;
using specula::test::expect_packed_model_matches;
using specula::test::expect_rows_read_back;
using specula::test::make_packed;
using specula::test::Packed;
using specula::test::random_floats;
using specula::test::random_weights;
using specula::test::run;
using specula::test::run_at_every_level;
using specula::test::runnable_levels;
using specula::test::same_bits;
using specula::test::SimdCap;

namespace {

const GGMLType kTypes[] = {GGMLType::Q4_K, GGMLType::Q6_K};

const std::vector<std::pair<int64_t, int64_t>>& shapes() {
    static const std::vector<std::pair<int64_t, int64_t>> s = {
        {1, 256}, {5, 512}, {16, 256}, {17, 768}, {33, 2048}, {100, 256}, {7, 1280}};
    return s;
}

}  // namespace

TEST(RepackK, LayoutSizes) {
    EXPECT_TRUE(repackable(GGMLType::Q4_K));
    EXPECT_TRUE(repackable(GGMLType::Q6_K));
    EXPECT_FALSE(repackable(GGMLType::Q5_K));
    // Within 3% of the row layout for whole tiles (resident memory stays near the file's).
    for (GGMLType t : kTypes) {
        const WeightView W{t, 64, 4096, nullptr};
        const double ratio = double(packed_size(W)) / double(W.row_bytes() * W.rows);
        EXPECT_GE(ratio, 1.0);
        EXPECT_LT(ratio, 1.03) << type_name(t);
        EXPECT_EQ(packed_tile_bytes(t, 4096) % 64, 0u);
    }
}

TEST(RepackK, RowsReadBackUnchanged) {
    for (GGMLType t : kTypes) {
        for (auto [rows, cols] : shapes()) {
            SCOPED_TRACE(testing::Message() << type_name(t) << " " << rows << "x" << cols);
            expect_rows_read_back(make_packed(t, rows, cols, 7 + static_cast<uint32_t>(rows)));
        }
    }
}

TEST(RepackK, EqualsReferenceAtEveryLevelBitForBit) {
    for (GGMLType t : kTypes) {
        for (auto [rows, cols] : shapes()) {
            SCOPED_TRACE(testing::Message() << type_name(t) << " " << rows << "x" << cols);
            Packed p = make_packed(t, rows, cols, 11 + static_cast<uint32_t>(cols));
            constexpr int ntok = 7;
            std::mt19937 rng(3);
            const std::vector<float> x = random_floats(rng, ntok * cols);
            const std::vector<std::vector<float>> per_level = run_at_every_level(p.W, x, ntok);
            // Against the reference dot product of the row layout (another float order).
            MatmulScratch scratch;
            const size_t stride = quantize_acts(t, x.data(), cols, cols, ntok, scratch);
            for (int tk = 0; tk < ntok; ++tk) {
                for (int64_t r = 0; r < rows; ++r) {
                    const float ref =
                        vec_dot_ref(t, cols, p.rowwise.row(r), scratch.acts.data() + tk * stride);
                    const float got = per_level[0][tk * rows + r];
                    ASSERT_NEAR(got, ref, 1e-4f * (1.f + std::fabs(ref)))
                        << "t " << tk << " r " << r;
                }
            }
            for (size_t l = 1; l < per_level.size(); ++l) {
                EXPECT_TRUE(same_bits(per_level[0], per_level[l]))
                    << simd_level_name(runnable_levels()[l]) << " differs from scalar";
            }
        }
    }
}

namespace {

// Every build of a level against the scalar reference for ntok tokens of x (cols each), called
// directly: the AVX2 level's two (vpmaddubsw + vpmaddwd, and AVX-VNNI's vpdpbusd) and the AVX-512
// level's two (sub-block scales by vpdpwssd on int16 halves, and by vpmulld): a level picks one
// of its builds by the CPU (AVX-VNNI where the CPU has it, vpmulld on AMD), so the other is not
// otherwise reached on every CPU.
void expect_builds_equal_scalar(GGMLType t, const Packed& p, const std::vector<float>& x,
                                int64_t cols, int ntok) {
    std::vector<Isa> builds;  // those this CPU runs
    if (cpu_features().avx2) builds.push_back(Isa::AVX2);
    if (cpu_features().avx_vnni) builds.push_back(Isa::AVXVNNI);
    if (cpu_features().avx512) builds.insert(builds.end(), {Isa::AVX512, Isa::AVX512Mulld});
    MatmulScratch s;
    const size_t stride = quantize_acts(t, x.data(), cols, cols, ntok, s);
    std::vector<uint8_t> q(kq_act_bytes(cols, ntok));
    std::vector<float> d(kq_act_floats(cols, ntok));
    std::vector<int32_t> corr(kq_act_corrs(cols, ntok));
    const PackedActs a =
        kq_prepare_acts(s.acts.data(), stride, cols, ntok, q.data(), d.data(), corr.data());
    std::vector<float> ref(16 * ntok), got(16 * ntok);
    packed_tile_at(t, Isa::Scalar)(p.buf->data(), a, ntok, 0, 16, ref.data(), 16);
    for (Isa isa : builds) {
        const PackedTileFn fn = packed_tile_at(t, isa);
        ASSERT_NE(fn, nullptr) << isa_name(isa);
        std::fill(got.begin(), got.end(), NAN);
        fn(p.buf->data(), a, ntok, 0, 16, got.data(), 16);
        EXPECT_TRUE(same_bits(ref, got)) << isa_name(isa);
        // Rows 3 .. 12 only: the same values, shifted.
        std::vector<float> part(9 * ntok, NAN);
        fn(p.buf->data(), a, ntok, 3, 12, part.data(), 9);
        for (int tk = 0; tk < ntok; ++tk) {
            for (int r = 3; r < 12; ++r) ASSERT_EQ(part[tk * 9 + r - 3], ref[tk * 16 + r]);
        }
    }
}

}  // namespace

TEST(RepackK, MulldSwitchPicksTheAvx512Build) {
    if (!cpu_features().avx512) GTEST_SKIP() << "needs AVX-512";
    for (KqMulld m : {KqMulld::On, KqMulld::Off, KqMulld::Auto}) {
        KernelPolicy p;
        p.amx = AmxMode::Off;
        p.kq_mulld = m;
        const ScopedKernelPolicy scope(p);
        const bool on = m == KqMulld::On || (m == KqMulld::Auto && cpu_features().amd);
        EXPECT_EQ(kq_mulld_at_avx512(), on);
        for (GGMLType t : kTypes) {
            EXPECT_EQ(best_packed_tile(t), packed_tile_at(t, on ? Isa::AVX512Mulld : Isa::AVX512))
                << type_name(t) << " kq_mulld " << static_cast<int>(m);
        }
    }
}

TEST(RepackK, EveryBuildOfALevelAgrees) {
    for (GGMLType t : kTypes) {
        Packed p = make_packed(t, 16, 1024, 77);
        for (int ntok : {1, 2, 3, 5, 9, 10, 17}) {
            SCOPED_TRACE(testing::Message() << type_name(t) << " ntok " << ntok);
            std::mt19937 rng(ntok);
            expect_builds_equal_scalar(t, p, random_floats(rng, ntok * 1024), 1024, ntok);
        }
    }
}

TEST(RepackK, ExtremeValuesStayExact) {
    // All-63 and all-0 Q6_K / all-15 and all-0 Q4_K quants with the largest scales (Q6_K's of
    // either sign) against activations of -127 and 127 (Q8_K's range: its quantiser never gives
    // -128): the int32 sums, the SIMD byte products, the int16 half sums (Q6_K's centred halves of
    // 8 reach 8 * 32 * 127) and the vpmulld products must not saturate.
    for (auto [t, fill] : {std::pair{GGMLType::Q4_K, 0xFF},
                           {GGMLType::Q4_K, 0x00},
                           {GGMLType::Q6_K, 0xFF},
                           {GGMLType::Q6_K, 0x00}}) {
        SCOPED_TRACE(testing::Message() << type_name(t) << " quants 0x" << std::hex << fill);
        const int64_t rows = 16, cols = 512;
        std::mt19937 rng(1);
        Packed p = make_packed(t, rows, cols, 5);
        for (size_t i = 0; i < p.w.size(); ++i) {
            const size_t off = i % type_traits(t).type_size;
            if (t == GGMLType::Q4_K && off >= 4) p.w[i] = off < 16 ? 0xFF : fill;  // scales, qs
            if (t == GGMLType::Q6_K && off < 208) {
                p.w[i] = off < 192 ? fill : (fill ? 0x7F : 0x80);  // ql and qh, scales
            }
        }
        repack(p.rowwise, p.buf->data());
        std::vector<float> x(2 * cols);
        for (int64_t c = 0; c < cols; ++c) {
            x[c] = c % 2 ? 1.0f : -1.0f;
            x[cols + c] = -1.0f;
        }
        expect_builds_equal_scalar(t, p, x, cols, 2);
        // Nine tokens (the vpmulld build's one chain per token) of the same two rows in turn.
        std::vector<float> x9;
        for (int tk = 0; tk < 9; ++tk)
            x9.insert(x9.end(), x.begin() + (tk % 2) * cols, x.begin() + (tk % 2 + 1) * cols);
        expect_builds_equal_scalar(t, p, x9, cols, 9);
        std::vector<std::vector<float>> per_level;
        for (SimdLevel l : runnable_levels()) {
            SimdCap cap(l);
            per_level.push_back(run(p.W, x, 2, 1));
        }
        MatmulScratch scratch;
        const size_t stride = quantize_acts(t, x.data(), cols, cols, 2, scratch);
        for (int tk = 0; tk < 2; ++tk) {
            for (int64_t r = 0; r < rows; ++r) {
                const float ref =
                    vec_dot_ref(t, cols, p.rowwise.row(r), scratch.acts.data() + tk * stride);
                ASSERT_NEAR(per_level[0][tk * rows + r], ref, 1e-4f * (1.f + std::fabs(ref)));
            }
        }
        for (size_t l = 1; l < per_level.size(); ++l) {
            EXPECT_TRUE(same_bits(per_level[0], per_level[l]))
                << simd_level_name(runnable_levels()[l]);
        }
    }
}

TEST(RepackK, BatchAndThreadInvariant) {
    for (GGMLType t : kTypes) {
        for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 512}, {130, 256}}) {
            Packed p = make_packed(t, rows, cols, 99);
            std::mt19937 rng(5);
            const int kMax = 512;
            const std::vector<float> x = random_floats(rng, kMax * cols);
            for (SimdLevel l : runnable_levels()) {
                SCOPED_TRACE(testing::Message() << type_name(t) << " " << simd_level_name(l));
                SimdCap cap(l);
                const std::vector<float> all = run(p.W, x, kMax, 2);
                for (int n = 1; n <= 17; ++n) {
                    for (int threads : {1, 3}) {
                        if (l == SimdLevel::Scalar && threads == 3 && n > 5) continue;  // slow
                        const std::vector<float> y = run(p.W, x, n, threads);
                        ASSERT_EQ(0, std::memcmp(y.data(), all.data(), y.size() * sizeof(float)))
                            << "ntok " << n << " threads " << threads;
                    }
                }
            }
        }
    }
}

TEST(RepackK, RowRangesAndMixedJobs) {
    for (GGMLType t : kTypes) {
        SCOPED_TRACE(type_name(t));
        Packed p = make_packed(t, 45, 512, 21);
        std::mt19937 rng(8);
        constexpr int ntok = 6;
        const std::vector<float> x = random_floats(rng, ntok * 512);
        const std::vector<float> full = run(p.W, x, ntok, 2);
        MatmulScratch scratch;
        const size_t stride = quantize_acts(t, x.data(), 512, 512, ntok, scratch);
        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 45}, {3, 19}, {16, 32}, {40, 45}}) {
            std::vector<float> part(ntok * (r1 - r0), NAN);
            matmul_rows(p.W, scratch.acts.data(), stride, ntok, r0, r1, part.data(), r1 - r0);
            for (int tk = 0; tk < ntok; ++tk) {
                for (int64_t r = r0; r < r1; ++r) {
                    ASSERT_EQ(part[tk * (r1 - r0) + (r - r0)], full[tk * 45 + r]) << r0 << " " << r;
                }
            }
        }
        // Packed Q4_K, packed Q6_K and a row-layout weight in one matmul_multi: each as if alone.
        Packed other =
            make_packed(t == GGMLType::Q4_K ? GGMLType::Q6_K : GGMLType::Q4_K, 20, 512, 3);
        ThreadPool pool(2);
        std::vector<float> y1(ntok * 45), y2(ntok * 45), y3(ntok * 20);
        const MatmulJob jobs[] = {
            {p.W, y1.data(), 45}, {p.rowwise, y2.data(), 45}, {other.W, y3.data(), 20}};
        matmul_multi(jobs, x.data(), 512, ntok, pool, scratch);
        EXPECT_TRUE(same_bits(y1, full));
        EXPECT_TRUE(same_bits(y2, run(p.rowwise, x, ntok, 2)));
        EXPECT_TRUE(same_bits(y3, run(other.W, x, ntok, 2)));
    }
}

TEST(RepackK, ModelsArePackedAndAgree) {
    for (const char* stem : {"rand-llama-tok512-d256-l2-Q4_K_M", "rand-llama-tok512-d256-l2-Q6_K",
                             "rand-llama-d256-l2-Q4_K_M"}) {
        SCOPED_TRACE(stem);
        const std::string path =
            test::shared_path(std::string("models/synthetic/") + stem + ".gguf");
        auto packed = Model::load(path);
        auto plain = Model::load(path, LoadOptions{.repack = false});
        ASSERT_FALSE(packed->packed.empty());
        EXPECT_TRUE(plain->packed.empty());
        int n_packed = 0;
        for (const LayerWeights& l : packed->layers) {
            for (const WeightView* w :
                 {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
                if (kq_repackable(w->type)) {
                    EXPECT_NE(w->packed, nullptr);
                }
                n_packed += w->packed != nullptr;
            }
        }
        EXPECT_GT(n_packed, 0);
        expect_packed_model_matches(*packed, *plain);
    }
}
