// Packed Q8_0 weights (kernels/repack.h): the tiled layout holds the same values as the rows; the
// tile kernels equal the reference dot products; every level (scalar, AVX2, AVX-512) gives the
// same bits; results are bit-identical whatever the number of tokens (1..17, 512), the thread
// count or the row sub-range; odd row counts and tiny matrices work; and a loaded Q8_0 model
// (tied output included) is packed with its logits unchanged in shape and close to the unpacked
// ones, and batch invariant; passes of 2-9 tokens' block records hold their values and give the
// same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/layout/blocks.h"
#include "kernels/matmul.h"
#include "kernels/quants.h"
#include "kernels/repack.h"
#include "kernels/table.h"
#include "model/load/model.h"
#include "packed_test_util.h"
#include "test_util.h"

using namespace specula;
using specula::test::expect_packed_model_matches;
using specula::test::expect_rows_read_back;
using specula::test::Packed;
using specula::test::random_floats;
using specula::test::random_weights;
using specula::test::run;
using specula::test::run_at_every_level;
using specula::test::runnable_levels;
using specula::test::same_bits;
using specula::test::SimdCap;

namespace {

// The Q8_0 matrices of these tests.
Packed make_packed(int64_t rows, int64_t cols, uint32_t seed) {
    return specula::test::make_packed(GGMLType::Q8_0, rows, cols, seed);
}

const std::vector<std::pair<int64_t, int64_t>>& shapes() {
    static const std::vector<std::pair<int64_t, int64_t>> s = {
        {1, 32}, {5, 64}, {16, 96}, {17, 32}, {33, 2048}, {100, 256}, {48, 160}};
    return s;
}

}  // namespace

TEST(Repack, RowsReadBackUnchanged) {
    for (auto [rows, cols] : shapes()) {
        SCOPED_TRACE(testing::Message() << rows << "x" << cols);
        expect_rows_read_back(make_packed(rows, cols, 7 + static_cast<uint32_t>(rows)));
    }
}

// repack writes every byte of its tiles (an odd block count's unused half and the rows past the
// end as zeros) whatever the buffer held: a buffer of 0xA5 bytes ends equal to a fresh one.
TEST(Repack, WritesEveryByteOfTheTiles) {
    for (auto [rows, cols] : shapes()) {
        SCOPED_TRACE(testing::Message() << rows << "x" << cols);
        const Packed p = make_packed(rows, cols, 3 + static_cast<uint32_t>(cols));
        std::vector<uint8_t> dirty(packed_size(p.rowwise), 0xA5);
        repack(p.rowwise, dirty.data());
        EXPECT_EQ(std::memcmp(dirty.data(), p.buf->data(), dirty.size()), 0);
    }
}

// 7 tokens run the tile kernels; 23 the AVX-512 pair kernel on whole tile pairs (kernels/repack.h),
// which must give the scalar reference's bits as well.
TEST(Repack, EqualsReferenceAtEveryLevelBitForBit) {
    for (int ntok : {7, 23})
        for (auto [rows, cols] : shapes()) {
            SCOPED_TRACE(testing::Message() << rows << "x" << cols << ", " << ntok << " tokens");
            Packed p = make_packed(rows, cols, 11 + static_cast<uint32_t>(cols));
            std::mt19937 rng(3);
            const std::vector<float> x = random_floats(rng, ntok * cols);
            const std::vector<std::vector<float>> per_level = run_at_every_level(p.W, x, ntok);
            // Against the reference dot product of the row layout (a different summation order).
            MatmulScratch scratch;
            const size_t stride =
                quantize_acts(GGMLType::Q8_0, x.data(), cols, cols, ntok, scratch);
            for (int t = 0; t < ntok; ++t) {
                for (int64_t r = 0; r < rows; ++r) {
                    const float ref = vec_dot_ref(GGMLType::Q8_0, cols, p.rowwise.row(r),
                                                  scratch.acts.data() + t * stride);
                    const float got = per_level[0][t * rows + r];
                    ASSERT_NEAR(got, ref, 1e-5f * (1.f + std::fabs(ref)))
                        << "t " << t << " r " << r;
                }
            }
            for (size_t l = 1; l < per_level.size(); ++l) {
                EXPECT_TRUE(same_bits(per_level[0], per_level[l]))
                    << simd_level_name(runnable_levels()[l]) << " differs from scalar";
            }
        }
}

TEST(Repack, BatchAndThreadInvariant) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 512}, {130, 96}}) {
        Packed p = make_packed(rows, cols, 99);
        std::mt19937 rng(5);
        const int kMax = 512;
        const std::vector<float> x = random_floats(rng, kMax * cols);
        for (SimdLevel l : runnable_levels()) {
            SCOPED_TRACE(simd_level_name(l));
            SimdCap cap(l);
            const std::vector<float> all = run(p.W, x, kMax, 2);
            std::vector<int> counts;
            for (int n = 1; n <= 17; ++n) counts.push_back(n);
            for (int n : counts) {
                for (int threads : {1, 3}) {
                    const std::vector<float> y = run(p.W, x, n, threads);
                    ASSERT_EQ(0, std::memcmp(y.data(), all.data(), y.size() * sizeof(float)))
                        << "ntok " << n << " threads " << threads;
                }
            }
        }
    }
}

// Passes of 2 to 9 tokens also carry their activations as block records (PackedActs::records):
// each record holds exactly the rows' corr, d and quants, and the tile kernel of every level gives
// the same bits with the records as without them (and as the scalar reference).
TEST(Repack, BlockRecordsHoldTheTokensValues) {
    const int64_t rows = 48, cols = 160;
    Packed p = make_packed(rows, cols, 17);
    const size_t tb = packed_tile_bytes(GGMLType::Q8_0, cols);
    std::mt19937 rng(9);
    for (int ntok = 1; ntok <= kBlockRecordTokens + 2; ++ntok) {
        SCOPED_TRACE(testing::Message() << ntok << " tokens");
        const std::vector<float> x = random_floats(rng, ntok * cols);
        MatmulScratch scratch;
        const size_t stride = quantize_acts(GGMLType::Q8_0, x.data(), cols, cols, ntok, scratch);
        std::vector<float> d;
        std::vector<int32_t> corr;
        std::vector<uint8_t> q;
        const PackedActs a =
            packed_acts(GGMLType::Q8_0, scratch.acts.data(), stride, cols, ntok, d, corr, q);
        if (ntok < 2 || ntok > kBlockRecordTokens) {
            EXPECT_EQ(a.records, nullptr);
            continue;
        }
        ASSERT_NE(a.records, nullptr);
        ASSERT_EQ(a.record_tokens, ntok);
        for (int64_t b = 0; b < a.nb; ++b) {
            const uint8_t* rec = a.records + b * block_record_bytes(ntok);
            for (int t = 0; t < ntok; ++t) {
                int32_t c;
                float dv;
                std::memcpy(&c, rec + 4 * t, 4);
                std::memcpy(&dv, rec + 4 * (ntok + t), 4);
                ASSERT_EQ(c, a.corr[t * a.nb + b]) << "b " << b << " t " << t;
                ASSERT_EQ(dv, a.d[t * a.nb + b]) << "b " << b << " t " << t;
                const auto* blk = reinterpret_cast<const block_q8_0*>(a.q + t * a.stride) + b;
                ASSERT_EQ(0, std::memcmp(rec + 8 * ntok + 32 * t, blk->qs, 32));
            }
        }
        PackedActs rows_only = a;
        rows_only.records = nullptr;
        std::vector<float> ref(ntok * kPackRows), with(ref.size()), without(ref.size());
        for (SimdLevel l : runnable_levels()) {
            SCOPED_TRACE(simd_level_name(l));
            SimdCap cap(l);
            const PackedTileFn fn = best_packed_tile(GGMLType::Q8_0);
            for (int64_t tile = 0; tile * kPackRows < rows; ++tile) {
                const uint8_t* w = p.W.packed + tile * tb;
                for (auto [lo, hi] : {std::pair{0, 16}, {3, 11}}) {
                    packed_tile_ref(w, rows_only, ntok, lo, hi, ref.data(), kPackRows);
                    fn(w, a, ntok, lo, hi, with.data(), kPackRows);
                    fn(w, rows_only, ntok, lo, hi, without.data(), kPackRows);
                    for (int t = 0; t < ntok; ++t) {
                        const size_t o = size_t(t) * kPackRows, n = size_t(hi - lo);
                        ASSERT_EQ(0, std::memcmp(&with[o], &ref[o], n * sizeof(float)));
                        ASSERT_EQ(0, std::memcmp(&without[o], &ref[o], n * sizeof(float)));
                    }
                }
            }
        }
    }
}

TEST(Repack, RowRangesAndMixedJobs) {
    specula::test::expect_row_ranges_and_mixed_jobs(GGMLType::Q8_0);
}

TEST(Repack, ModelsArePackedAndAgree) {
    for (const char* stem :
         {"rand-llama-tok512-d256-l2-Q8_0", "rand-llama-llama3vocab-d64-l1-tied-Q8_0",
          "rand-llama-moe4x2-tok512-d256-l2-Q8_0"}) {
        SCOPED_TRACE(stem);
        const std::string path =
            test::shared_path(std::string("models/synthetic/") + stem + ".gguf");
        auto packed = Model::load(path);
        auto plain = Model::load(path, LoadOptions{.repack = false});
        ASSERT_FALSE(packed->packed.empty());
        EXPECT_TRUE(plain->packed.empty());
        EXPECT_NE(packed->output.packed, nullptr);
        EXPECT_EQ(packed->tok_embd.packed, nullptr);  // get_rows reads the row layout
        for (const LayerWeights& l : packed->layers) {
            EXPECT_NE(l.wq.packed, nullptr);
            // Experts of whole tiles are packed as one stack (moe4x2: 4 experts of 16-row tiles).
            if (l.ffn_up_exps.rows > 0) EXPECT_NE(l.ffn_up_exps.packed, nullptr);
        }
        expect_packed_model_matches(*packed, *plain);
    }
}

// pack_weights spreads the matrices over a thread pool: every packed matrix has the same bytes
// whatever the thread count, and none is left unpacked.
TEST(Repack, PackingOnSeveralThreadsGivesTheSameBytes) {
    for (const char* stem : {"rand-llama-tok512-d256-l2-Q4_K_M", "rand-llama-tok512-d256-l2-F16",
                             "rand-llama-llama3vocab-d64-l1-tied-Q8_0"}) {
        SCOPED_TRACE(stem);
        const std::string path =
            test::shared_path(std::string("models/synthetic/") + stem + ".gguf");
        auto one = Model::load(path, LoadOptions{.n_threads = 1});
        ASSERT_FALSE(one->packed.empty());
        for (int n : {2, 3, 64}) {
            auto many = Model::load(path, LoadOptions{.n_threads = n});
            ASSERT_EQ(many->packed.size(), one->packed.size()) << n << " threads";
            for (size_t i = 0; i < one->packed.size(); ++i) {
                ASSERT_EQ(many->packed[i].size(), one->packed[i].size());
                EXPECT_EQ(std::memcmp(many->packed[i].data(), one->packed[i].data(),
                                      one->packed[i].size()),
                          0)
                    << "buffer " << i << ", " << n << " threads";
            }
            for (size_t l = 0; l < many->layers.size(); ++l) {
                EXPECT_NE(many->layers[l].ffn_down.packed, nullptr) << "layer " << l;
                EXPECT_NE(many->layers[l].wq.packed, nullptr) << "layer " << l;
            }
        }
    }
}
