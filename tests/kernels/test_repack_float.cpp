// Packed F16 / BF16 weights (kernels/layout/repack_float.h): the panels hold the same values as the
// rows; the panel kernels are close to the row-layout dot products; every level (scalar, AVX2,
// AVX-512) gives the same bits (but BF16 at AVX-512 where it runs the vdpbf16ps kernel, within
// rounding of the others; both BF16 kernels are run on every AVX-512 CPU); results are
// bit-identical whatever the number of tokens (1, 2, 5, 9, 16, 1..40, 512), the thread count or the
// row sub-range; odd shapes (rows not a multiple of 16, columns not a multiple of the 256-column
// block) work; and loaded F16 / BF16 models are packed, with logits batch invariant and close to
// the unpacked ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/layout/repack_float.h"
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
using specula::test::run;
using specula::test::run_at_every_level;
using specula::test::runnable_levels;
using specula::test::same_bits;
using specula::test::SimdCap;

namespace {

// The kernel policy with BF16 panels on vdpbf16ps at AVX-512 ("1") or on the FMA panels ("0").
KernelPolicy with_bf16_dot(const char* dot) {
    KernelPolicy p = kernel_policy();
    p.bf16_dot = std::strcmp(dot, "1") == 0 ? Bf16Dot::On : Bf16Dot::Off;
    return p;
}

const std::vector<std::pair<int64_t, int64_t>>& shapes() {
    static const std::vector<std::pair<int64_t, int64_t>> s = {
        {1, 8}, {5, 64}, {16, 96}, {17, 300}, {33, 2048}, {100, 256}, {48, 1000}, {19, 301}};
    return s;
}

constexpr GGMLType kTypes[] = {GGMLType::F16, GGMLType::BF16};

}  // namespace

TEST(RepackFloat, TypesAreRepackable) {
    EXPECT_TRUE(repackable(GGMLType::F16));
    EXPECT_TRUE(repackable(GGMLType::BF16));
    EXPECT_FALSE(float_repackable(GGMLType::F32));
    EXPECT_EQ(packed_size({GGMLType::F16, 17, 100, nullptr}), size_t{2} * 16 * 100 * 2);
}

TEST(RepackFloat, RowsReadBackUnchanged) {
    for (GGMLType t : kTypes) {
        for (auto [rows, cols] : shapes()) {
            SCOPED_TRACE(testing::Message() << type_name(t) << " " << rows << "x" << cols);
            expect_rows_read_back(make_packed(t, rows, cols, 7 + static_cast<uint32_t>(rows)));
        }
    }
}

TEST(RepackFloat, CloseToRowLayoutAndEqualAtEveryLevel) {
    // 23 tokens: a whole chunk of 16 (kFloatChunk, groups of several tokens) and one of 7. BF16
    // at AVX-512 runs both its kernels whatever this CPU's default (bf16_dot_at_avx512).
    for (const char* dot : {"0", "1"})
        for (int ntok : {7, 23})
            for (GGMLType t : kTypes) {
                if (t != GGMLType::BF16 && std::strcmp(dot, "1") == 0) continue;
                const ScopedKernelPolicy bf16_dot(with_bf16_dot(dot));
                for (auto [rows, cols] : shapes()) {
                    SCOPED_TRACE(testing::Message() << type_name(t) << " " << rows << "x" << cols
                                                    << ", " << ntok << " tokens, bf16_dot " << dot);
                    Packed p = make_packed(t, rows, cols, 11 + static_cast<uint32_t>(cols));
                    std::mt19937 rng(3);
                    const std::vector<float> x = random_floats(rng, ntok * cols);
                    const std::vector<std::vector<float>> per_level =
                        run_at_every_level(p.W, x, ntok);
                    // Against the reference dot product of the row layout (another summation
                    // order), in double: |error| within a few ulps of the sum of |products|.
                    MatmulScratch scratch;
                    const size_t stride = quantize_acts(t, x.data(), cols, cols, ntok, scratch);
                    std::vector<float> w(cols), a(cols);
                    for (int tk = 0; tk < ntok; ++tk) {
                        dequantize_row(t, scratch.acts.data() + tk * stride, a.data(), cols);
                        for (int64_t r = 0; r < rows; ++r) {
                            dequantize_row(t, p.rowwise.row(r), w.data(), cols);
                            double ref = 0, mag = 0;
                            for (int64_t k = 0; k < cols; ++k) {
                                ref += double(w[k]) * a[k];
                                mag += std::fabs(double(w[k]) * a[k]);
                            }
                            for (size_t l = 0; l < per_level.size(); ++l) {
                                const float got = per_level[l][tk * rows + r];
                                ASSERT_NEAR(got, ref, 1e-5 * mag + 1e-30)
                                    << simd_level_name(runnable_levels()[l]) << " t " << tk << " r "
                                    << r;
                            }
                        }
                    }
                    // Bit for bit across levels, but for BF16 at AVX-512: vdpbf16ps (one rounding
                    // per column pair, denormals flushed) is only within rounding of the others.
                    for (size_t l = 1; l < per_level.size(); ++l) {
                        if (t == GGMLType::BF16 && runnable_levels()[l] == SimdLevel::AVX512 &&
                            bf16_dot_at_avx512())
                            continue;
                        EXPECT_TRUE(same_bits(per_level[0], per_level[l]))
                            << simd_level_name(runnable_levels()[l]) << " differs from scalar";
                    }
                }
            }
}

TEST(RepackFloat, BatchAndThreadInvariant) {
    for (const char* dot : {"0", "1"})
        for (GGMLType t : kTypes) {
            if (t != GGMLType::BF16 && std::strcmp(dot, "1") == 0) continue;
            const ScopedKernelPolicy bf16_dot(with_bf16_dot(dot));
            for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 600}, {130, 96}, {35, 515}}) {
                Packed p = make_packed(t, rows, cols, 99);
                std::mt19937 rng(5);
                const int kMax = 512;
                const std::vector<float> x = random_floats(rng, kMax * cols);
                for (SimdLevel l : runnable_levels()) {
                    SCOPED_TRACE(testing::Message() << type_name(t) << " " << simd_level_name(l)
                                                    << " bf16_dot " << dot);
                    SimdCap cap(l);
                    const std::vector<float> all = run(p.W, x, kMax, 2);
                    std::vector<int> counts;
                    for (int n = 1; n <= 40; ++n) counts.push_back(n);
                    for (int n : counts) {
                        for (int threads : {1, 3}) {
                            if (threads == 3 && n % 4 != 1 && n != 16)
                                continue;  // 1, 5, 9, 16, ...
                            const std::vector<float> y = run(p.W, x, n, threads);
                            ASSERT_EQ(0,
                                      std::memcmp(y.data(), all.data(), y.size() * sizeof(float)))
                                << "ntok " << n << " threads " << threads;
                        }
                    }
                }
            }
        }
}

TEST(RepackFloat, RowRangesAndMixedJobs) {
    specula::test::expect_row_ranges_and_mixed_jobs(GGMLType::F16);
}

TEST(RepackFloat, ModelsArePackedAndAgree) {
    for (const char* stem : {"rand-llama-tok512-d256-l2-F16", "rand-llama-tok512-d256-l2-BF16",
                             "rand-llama-tok512-d256-l2-tied-F16"}) {
        SCOPED_TRACE(stem);
        const std::string path =
            test::shared_path(std::string("models/synthetic/") + stem + ".gguf");
        auto packed = Model::load(path);
        std::unique_ptr<Model> plain;
        {
            KernelPolicy p = kernel_policy();
            p.repack_float = false;  // the row layout for F16 / BF16 only
            const ScopedKernelPolicy no_float_repack(p);
            plain = Model::load(path);
        }
        auto unpacked = Model::load(path, LoadOptions{.repack = false});
        EXPECT_TRUE(unpacked->packed.empty());  // repack = false wins
        ASSERT_FALSE(packed->packed.empty());
        EXPECT_TRUE(plain->packed.empty());
        EXPECT_NE(packed->output.packed, nullptr);
        EXPECT_EQ(packed->tok_embd.packed, nullptr);  // get_rows reads the row layout
        for (const LayerWeights& l : packed->layers) {
            EXPECT_NE(l.wq.packed, nullptr);
            EXPECT_NE(l.ffn_down.packed, nullptr);
        }
        // BF16 at AVX-512 (vdpbf16ps) rounds its sums differently from the row layout's kernel, so
        // an activation's BF16 rounding can flip and move later logits: allowed as much as
        // llama.cpp's own batched and single-token BF16 logits differ (shared/reference's README:
        // 0.026; its parity tolerance for BF16 is 0.1).
        const bool bf16_dot = packed->layers[0].wq.type == GGMLType::BF16 &&
                              active_simd_level() == SimdLevel::AVX512 && bf16_dot_at_avx512();
        expect_packed_model_matches(*packed, *plain, bf16_dot ? 0.03 : 0);
    }
}
