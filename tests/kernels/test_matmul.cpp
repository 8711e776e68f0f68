// matmul / matmul_rows / quantize_acts: results equal the scalar reference dot products, are
// bit-identical whatever the number of tokens in a call and the number of threads (batch
// invariance, at every SIMD level this CPU runs), honour the strides, reuse their scratch, and
// reject bad weights with a specula::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quants.h"
#include "kernels/repack.h"
#include "test_util.h"

using namespace specula;
using specula::test::random_floats;
using specula::test::random_weights;
using specula::test::runnable_levels;
using specula::test::SimdCap;
using specula::test::weight_types;

namespace {

constexpr int64_t kRows = 37;   // odd, so thread splits and row tiles have ragged ends
constexpr int64_t kCols = 768;  // 3 super-blocks, 24 small blocks

struct Problem {
    GGMLType type;
    std::vector<uint8_t> w;
    WeightView W;
    std::vector<float> x;  // ntok x kCols
};

Problem make_problem(GGMLType t, int ntok, uint32_t seed) {
    std::mt19937 rng(seed);
    Problem p{t, random_weights(rng, t, kRows, kCols), {}, random_floats(rng, ntok * kCols)};
    p.W = WeightView{t, kRows, kCols, p.w.data()};
    return p;
}

bool same_bits(float a, float b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

TEST(Matmul, EqualsReferenceDotProducts) {
    ThreadPool pool(2);
    MatmulScratch scratch;
    constexpr int ntok = 5;
    for (GGMLType t : weight_types()) {
        SCOPED_TRACE(std::string(type_name(t)));
        Problem p = make_problem(t, ntok, 1234 + static_cast<uint32_t>(t));
        std::vector<float> y(ntok * kRows, NAN);
        matmul(p.W, p.x.data(), kCols, ntok, y.data(), kRows, pool, scratch);
        // The reference: each token rounded to the activation type as llama.cpp's CPU backend
        // does, then vec_dot_ref.
        const GGMLType at = vec_dot_type(t);
        std::vector<uint8_t> a(row_size(at, kCols));
        std::vector<float> wf(kCols), af(kCols);
        for (int tk = 0; tk < ntok; ++tk) {
            quantize_row_ggml_cpu(at, p.x.data() + tk * kCols, a.data(), kCols);
            dequantize_row(at, a.data(), af.data(), kCols);
            for (int64_t r = 0; r < kRows; ++r) {
                dequantize_row(t, p.W.row(r), wf.data(), kCols);
                double mag = 0;
                for (int64_t c = 0; c < kCols; ++c) mag += std::fabs(double(wf[c]) * af[c]);
                const float ref = vec_dot_ref(t, kCols, p.W.row(r), a.data());
                ASSERT_NEAR(y[tk * kRows + r], ref, 2e-5 * mag + 1e-6)
                    << "row " << r << " tok " << tk;
            }
        }
    }
}

// Token t of a call with ntok tokens gives exactly the bits of a call with that token alone,
// for every ntok in 1..16 (and a large batch), every thread count, at every SIMD level.
TEST(Matmul, BatchAndThreadInvariantAtEveryLevel) {
    constexpr int kMaxTok = 21;  // more than one 16-token chunk
    ThreadPool pool1(1), pool2(2), pool3(3);
    MatmulScratch scratch;
    for (SimdLevel level : runnable_levels()) {
        SimdCap cap(level);
        for (GGMLType t : weight_types()) {
            SCOPED_TRACE(std::string(type_name(t)) + " at " + simd_level_name(level));
            Problem p = make_problem(t, kMaxTok, 99 + static_cast<uint32_t>(t));
            std::vector<float> single(kMaxTok * kRows);
            for (int tk = 0; tk < kMaxTok; ++tk) {
                matmul(p.W, p.x.data() + tk * kCols, kCols, 1, single.data() + tk * kRows, kRows,
                       pool1, scratch);
            }
            std::vector<int> counts;
            for (int n = 1; n <= 16; ++n) counts.push_back(n);
            counts.push_back(kMaxTok);
            for (int n : counts) {
                for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
                    std::vector<float> y(n * kRows);
                    matmul(p.W, p.x.data(), kCols, n, y.data(), kRows, *pool, scratch);
                    for (int i = 0; i < n * kRows; ++i) {
                        ASSERT_TRUE(same_bits(y[i], single[i]))
                            << "ntok " << n << " threads " << pool->size() << " token " << i / kRows
                            << " row " << i % kRows << ": " << y[i] << " != " << single[i];
                    }
                }
            }
        }
    }
}

TEST(Matmul, HonoursStridesAndMatchesMatmulRows) {
    ThreadPool pool(2);
    MatmulScratch scratch;
    constexpr int ntok = 3;
    constexpr int64_t ldx = kCols + 13, ldy = kRows + 7;
    for (GGMLType t : {GGMLType::Q8_0, GGMLType::Q4_K, GGMLType::F16}) {
        SCOPED_TRACE(std::string(type_name(t)));
        Problem p = make_problem(t, ntok, 7);
        std::vector<float> xs(ntok * ldx, 1e30f);  // padding must never be read
        for (int tk = 0; tk < ntok; ++tk) {
            std::memcpy(&xs[tk * ldx], &p.x[tk * kCols], kCols * sizeof(float));
        }
        std::vector<float> y(ntok * ldy, -7.f), dense(ntok * kRows);
        matmul(p.W, xs.data(), ldx, ntok, y.data(), ldy, pool, scratch);
        matmul(p.W, p.x.data(), kCols, ntok, dense.data(), kRows, pool, scratch);
        for (int tk = 0; tk < ntok; ++tk) {
            for (int64_t r = 0; r < ldy; ++r) {
                if (r < kRows) {
                    ASSERT_TRUE(same_bits(y[tk * ldy + r], dense[tk * kRows + r]));
                } else {
                    ASSERT_EQ(y[tk * ldy + r], -7.f) << "wrote outside the output rows";
                }
            }
        }
        // matmul_rows over a sub-range writes the same values at offset r - r0.
        const size_t stride = quantize_acts(t, p.x.data(), kCols, kCols, ntok, scratch);
        EXPECT_EQ(stride, row_size(vec_dot_type(t), kCols));
        constexpr int64_t r0 = 5, r1 = 30;
        std::vector<float> part(ntok * (r1 - r0));
        matmul_rows(p.W, scratch.acts.data(), stride, ntok, r0, r1, part.data(), r1 - r0);
        for (int tk = 0; tk < ntok; ++tk) {
            for (int64_t r = r0; r < r1; ++r) {
                ASSERT_TRUE(same_bits(part[tk * (r1 - r0) + r - r0], dense[tk * kRows + r]));
            }
        }
    }
}

TEST(Matmul, ReusesScratchOnceWarm) {
    ThreadPool pool(2);
    MatmulScratch scratch;
    Problem p = make_problem(GGMLType::Q4_0, 8, 3);
    std::vector<float> y(8 * kRows);
    matmul(p.W, p.x.data(), kCols, 8, y.data(), kRows, pool, scratch);
    const uint8_t* buf = scratch.acts.data();
    const size_t cap = scratch.acts.capacity();
    const float* scales = scratch.act_scales.data();  // Q4_0 takes the float-scale entry
    const size_t scales_cap = scratch.act_scales.capacity();
    for (int n : {1, 8, 4, 8}) {
        matmul(p.W, p.x.data(), kCols, n, y.data(), kRows, pool, scratch);
        EXPECT_EQ(scratch.acts.data(), buf);
        EXPECT_EQ(scratch.acts.capacity(), cap);
        EXPECT_EQ(scratch.act_scales.data(), scales);
        EXPECT_EQ(scratch.act_scales.capacity(), scales_cap);
    }
}

TEST(Matmul, RejectsBadWeights) {
    ThreadPool pool(1);
    MatmulScratch scratch;
    std::vector<uint8_t> w(4096);
    std::vector<float> x(512), y(8);
    auto run = [&](GGMLType t, int64_t cols) {
        WeightView W{t, 1, cols, w.data()};
        matmul(W, x.data(), cols, 1, y.data(), 1, pool, scratch);
    };
    EXPECT_THROW(run(GGMLType::Q8_K, 256), Error);     // activation-only format
    EXPECT_THROW(run(GGMLType::IQ2_XXS, 256), Error);  // not supported
    EXPECT_THROW(run(static_cast<GGMLType>(4), 32), Error);
    EXPECT_THROW(run(static_cast<GGMLType>(1000), 32), Error);
    EXPECT_THROW(run(GGMLType::Q4_K, 128), Error);  // not a whole super-block
    EXPECT_THROW(run(GGMLType::Q8_0, 40), Error);
    EXPECT_THROW(run(GGMLType::Q8_0, 0), Error);
    WeightView two_rows{GGMLType::Q8_0, 2, 32, w.data()};
    EXPECT_THROW(matmul(two_rows, x.data(), 16, 2, y.data(), 2, pool, scratch), Error);  // ldx
    EXPECT_THROW(matmul(two_rows, x.data(), 32, 2, y.data(), 1, pool, scratch), Error);  // ldy
    EXPECT_THROW(matmul(two_rows, nullptr, 32, 1, y.data(), 2, pool, scratch), Error);
    WeightView null_data{GGMLType::Q8_0, 2, 32, nullptr};
    EXPECT_THROW(matmul(null_data, x.data(), 32, 1, y.data(), 2, pool, scratch), Error);
    WeightView W{GGMLType::Q8_0, 4, 32, w.data()};
    EXPECT_THROW(matmul_rows(W, w.data(), 34, 1, 2, 5, y.data(), 3), Error);
    EXPECT_THROW(matmul_rows(W, w.data(), 34, 1, 3, 2, y.data(), 3), Error);
}

TEST(Dispatch, LevelsAndEnvironmentCap) {
    const SimdLevel cpu = cpu_simd_level();
    {
        SimdCap cap(SimdLevel::Scalar);
        EXPECT_EQ(active_simd_level(), SimdLevel::Scalar);
    }
    {
        SimdCap cap(SimdLevel::AVX512);
        EXPECT_EQ(active_simd_level(), cpu);
    }
    {
        // The environment's cap, parsed once into the policy: a malformed value is an Error.
        const char* old = std::getenv("SPECULA_SIMD");
        const std::string saved = old ? old : "";
        setenv("SPECULA_SIMD", "sse9", 1);
        EXPECT_THROW(read_env(), Error);
        setenv("SPECULA_SIMD", "avx2", 1);
        EXPECT_EQ(kernel_policy_from_env(read_env()).simd_cap, SimdLevel::AVX2);
        EXPECT_NE(kernel_policy_from_env(read_env()).amx, AmxMode::Hardware);  // a cap below amx
        setenv("SPECULA_SIMD", "amx", 1);
        EXPECT_EQ(kernel_policy_from_env(read_env()).simd_cap, SimdLevel::AVX512);
        if (old)
            setenv("SPECULA_SIMD", saved.c_str(), 1);
        else
            unsetenv("SPECULA_SIMD");
        // Back to what the process started with: the CPU's level, under the cap of a
        // SPECULA_SIMD the suite may run with (its *_avx2 / *_scalar variants).
        EXPECT_EQ(active_simd_level(), std::min(cpu, kernel_policy_from_env(read_env()).simd_cap));
    }
    for (GGMLType t : weight_types()) {
        EXPECT_NE(vec_dot_kernel(t, SimdLevel::Scalar), nullptr) << type_name(t);
        EXPECT_NE(best_vec_dot(t), nullptr) << type_name(t);
    }
    EXPECT_EQ(best_vec_dot(GGMLType::Q8_K), nullptr);
    EXPECT_EQ(best_vec_dot(GGMLType::IQ2_XXS), nullptr);
}

// Real quantized tensors (the synthetic models' quantisation ladder, written by llama-quantize):
// matmul equals the reference dot products, approximates the float product of the dequantized
// weights (up to the activation rounding), and is batch invariant on 2 threads.
TEST(Matmul, RealTensorsFromSharedModels) {
    const char* files[] = {"F32",  "F16",    "BF16",   "Q8_0",   "Q4_0", "Q4_1",   "Q5_0",  "Q5_1",
                           "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"};
    ThreadPool pool(2);
    MatmulScratch scratch;
    std::mt19937 rng(8);
    std::set<GGMLType> seen;
    for (const char* f : files) {
        const std::string path = specula::test::shared_path(
            std::string("models/synthetic/rand-llama-tok512-d256-l2-") + f + ".gguf");
        auto file = GGUFFile::open(path);
        std::set<GGMLType> done;  // one tensor per type per file
        for (const GGUFTensor& t : file->tensors()) {
            if (t.ne.size() != 2 || !type_traits(t.type).supported || done.count(t.type)) continue;
            done.insert(t.type);
            seen.insert(t.type);
            SCOPED_TRACE(std::string(f) + " " + t.name);
            const WeightView W{t.type, t.n_rows(), t.ne[0], t.data};
            constexpr int ntok = 5;
            const auto x = random_floats(rng, ntok * W.cols);
            std::vector<float> y(ntok * W.rows), y1(W.rows);
            matmul(W, x.data(), W.cols, ntok, y.data(), W.rows, pool, scratch);
            const GGMLType at = vec_dot_type(t.type);
            std::vector<uint8_t> a(row_size(at, W.cols));
            std::vector<float> wf(W.cols);
            for (int tk = 0; tk < ntok; ++tk) {
                MatmulScratch s1;
                matmul(W, x.data() + tk * W.cols, W.cols, 1, y1.data(), W.rows, pool, s1);
                quantize_row_ggml_cpu(at, x.data() + tk * W.cols, a.data(), W.cols);
                for (int64_t r = 0; r < W.rows; ++r) {
                    dequantize_row(t.type, W.row(r), wf.data(), W.cols);
                    double exact = 0, mag = 0;
                    for (int64_t c = 0; c < W.cols; ++c) {
                        exact += double(wf[c]) * x[tk * W.cols + c];
                        mag += std::fabs(double(wf[c]) * x[tk * W.cols + c]);
                    }
                    const float got = y[tk * W.rows + r];
                    ASSERT_TRUE(same_bits(got, y1[r])) << "row " << r << " token " << tk;
                    ASSERT_NEAR(got, vec_dot_ref(t.type, W.cols, W.row(r), a.data()), 2e-5 * mag)
                        << "row " << r << " token " << tk;
                    ASSERT_NEAR(got, exact, 0.02 * mag + 1e-6) << "row " << r << " token " << tk;
                }
            }
        }
    }
    EXPECT_GE(seen.size(), 12u);  // the ladder covers (nearly) every supported weight type
}

// matmul_multi gives the bits of separate matmul calls: weights sharing an activation type (the
// Q4_K / Q6_K mix of a Q4_K_M attention block), weights that do not (run one by one), more
// weights than one pass takes, any ntok, 1 or 2 threads.
TEST(Matmul, MultiEqualsSeparateCalls) {
    ThreadPool pool1(1), pool2(2);
    MatmulScratch scratch;
    std::mt19937 rng(21);
    const std::vector<std::vector<std::pair<GGMLType, int64_t>>> sets = {
        {{GGMLType::Q4_K, 64}, {GGMLType::Q4_K, 16}, {GGMLType::Q6_K, 16}},
        {{GGMLType::Q8_0, 40}, {GGMLType::F16, 9}, {GGMLType::Q4_K, 33}, {GGMLType::Q8_0, 0}},
        std::vector<std::pair<GGMLType, int64_t>>(11, {GGMLType::Q5_0, 7}),
    };
    for (size_t si = 0; si < sets.size(); ++si) {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<MatmulJob> jobs;
        for (auto [t, rows] : sets[si]) {
            bufs.push_back(random_weights(rng, t, std::max<int64_t>(rows, 1), kCols));
            jobs.push_back({WeightView{t, rows, kCols, bufs.back().data()}, nullptr, rows + 3});
        }
        for (int ntok : {1, 7, 21}) {
            const auto x = random_floats(rng, ntok * kCols);
            for (ThreadPool* pool : {&pool1, &pool2}) {
                std::vector<std::vector<float>> got(jobs.size()), want(jobs.size());
                for (size_t j = 0; j < jobs.size(); ++j) {
                    const size_t n = static_cast<size_t>(ntok * jobs[j].ldy);
                    got[j].assign(n, -1.f);
                    want[j].assign(n, -1.f);
                    matmul(jobs[j].W, x.data(), kCols, ntok, want[j].data(), jobs[j].ldy, *pool,
                           scratch);
                    jobs[j].y = got[j].data();
                }
                matmul_multi(jobs, x.data(), kCols, ntok, *pool, scratch);
                for (size_t j = 0; j < jobs.size(); ++j) {
                    ASSERT_EQ(
                        std::memcmp(got[j].data(), want[j].data(), got[j].size() * sizeof(float)),
                        0)
                        << "set " << si << " weight " << j << " ntok " << ntok << " threads "
                        << pool->size();
                }
            }
        }
    }
    std::vector<uint8_t> w(row_size(GGMLType::Q8_0, 64) * 2);
    std::vector<float> x(64), y(4);
    const MatmulJob mismatched[] = {{WeightView{GGMLType::Q8_0, 1, 64, w.data()}, y.data(), 1},
                                    {WeightView{GGMLType::Q8_0, 1, 32, w.data()}, y.data(), 1}};
    EXPECT_THROW(matmul_multi(mismatched, x.data(), 64, 1, pool2, scratch), Error);
    const MatmulJob no_output[] = {{WeightView{GGMLType::Q8_0, 1, 64, w.data()}, nullptr, 1}};
    EXPECT_THROW(matmul_multi(no_output, x.data(), 64, 1, pool2, scratch), Error);
}

// matmul_stack gives each matrix of the stack the bits of its own matmul over its interleaved
// input rows (row layout and packed, Q8_0 / Q4_K / F32; whole and split matrices: 3 of 32 rows
// on 2 threads are split in tiles, 20 are not), and refuses rows that are no stack of n.
TEST(Matmul, StackEqualsOneMatmulPerMatrix) {
    ThreadPool pool1(1), pool2(2);
    MatmulScratch scratch;
    std::mt19937 rng(33);
    constexpr int64_t kCols = 256, kMatRows = 32;
    for (GGMLType t : {GGMLType::Q8_0, GGMLType::Q4_K, GGMLType::F32}) {
        for (int n : {3, 20}) {
            const std::vector<uint8_t> w = random_weights(rng, t, kMatRows * n, kCols);
            WeightView W{t, kMatRows * n, kCols, w.data()};
            std::unique_ptr<PackedBuffer> buf;
            for (bool packed : {false, true}) {
                if (packed) {
                    if (!repackable(t)) continue;
                    buf = std::make_unique<PackedBuffer>(packed_size(W));
                    repack(W, buf->data());
                    W.packed = buf->data();
                }
                for (int ntok : {1, 7}) {
                    const int64_t xs = kCols + 8, ys = kMatRows + 5, ldy = ys * n + 2;
                    const auto x = random_floats(rng, size_t(ntok) * n * xs);
                    for (ThreadPool* pool : {&pool1, &pool2}) {
                        std::vector<float> got(size_t(ntok) * ldy, -1.f), want = got;
                        for (int i = 0; i < n; ++i) {
                            matmul(stack_slice(W, i, n), x.data() + i * xs, n * xs, ntok,
                                   want.data() + i * ys, ldy, *pool, scratch);
                        }
                        matmul_stack(W, n, x.data(), xs, ntok, got.data(), ldy, ys, *pool, scratch);
                        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)),
                                  0)
                            << type_name(t) << " n " << n << (packed ? " packed" : " rows")
                            << " ntok " << ntok << " threads " << pool->size();
                    }
                }
            }
        }
    }
    std::vector<uint8_t> w(row_size(GGMLType::Q8_0, 64) * 5);
    std::vector<float> x(64 * 2), y(8);
    EXPECT_THROW(matmul_stack(WeightView{GGMLType::Q8_0, 5, 64, w.data()}, 2, x.data(), 64, 1,
                              y.data(), 8, 4, pool2, scratch),
                 Error);
}

// For the Q8_0-activation formats matmul takes the kernels' VecDotQ8Fn entry (the tokens' scales
// converted to floats once per call); it must give the bits of the plain VecDotFn kernel, which
// reads the fp16 scales itself, for every token-group size (1..12 tokens: groups of up to 5,
// balanced), an odd number of blocks (the unpaired last block), extreme scales, at every level.
TEST(Matmul, FloatScaleEntryEqualsVecDotKernel) {
    constexpr int64_t kRowsQ = 9, kColsQ = 25 * 32;  // 25 blocks: one left after the pairs
    constexpr int kMaxTok = 12;
    ThreadPool pool(2);
    MatmulScratch scratch, ref_scratch;
    std::mt19937 rng(5);
    for (SimdLevel level : runnable_levels()) {
        SimdCap cap(level);
        for (GGMLType t :
             {GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q5_0, GGMLType::IQ4_NL, GGMLType::MXFP4}) {
            SCOPED_TRACE(std::string(type_name(t)) + " at " + simd_level_name(level));
            auto w = random_weights(rng, t, kRowsQ, kColsQ);
            const WeightView W{t, kRowsQ, kColsQ, w.data()};
            auto x = random_floats(rng, kMaxTok * kColsQ);
            for (int i = 0; i < 32; ++i) x[3 * kColsQ + i] = 1e4f;    // a huge block scale
            for (int i = 0; i < 32; ++i) x[5 * kColsQ + 64 + i] = 0;  // a zero block
            x[7 * kColsQ + 100] = -3e3f;                              // one dominant element
            const size_t stride = quantize_acts(t, x.data(), kColsQ, kColsQ, kMaxTok, ref_scratch);
            const VecDotFn dot = best_vec_dot(t);
            std::vector<float> want(kMaxTok * kRowsQ);
            for (int tk = 0; tk < kMaxTok; ++tk) {
                for (int64_t r = 0; r < kRowsQ; ++r) {
                    dot(kColsQ, W.row(r), ref_scratch.acts.data() + tk * stride, stride, 1,
                        &want[tk * kRowsQ + r]);
                }
            }
            for (int n = 1; n <= kMaxTok; ++n) {
                std::vector<float> y(n * kRowsQ, NAN);
                matmul(W, x.data(), kColsQ, n, y.data(), kRowsQ, pool, scratch);
                for (int i = 0; i < n * kRowsQ; ++i) {
                    ASSERT_TRUE(same_bits(y[i], want[i]))
                        << "ntok " << n << " token " << i / kRowsQ << " row " << i % kRowsQ << ": "
                        << y[i] << " != " << want[i];
                }
            }
        }
    }
}

// The K-quants that have a two-row kernel at the AVX-512 level (Q4_K, Q5_K, Q6_K: each pair of
// rows in one 512-bit pass) give, through matmul, the bits of the AVX2 level's one-row kernel for
// every batch size 1..17, 64 and 512 (whole 16-token chunks plus ragged ones), with an odd number
// of rows (one row left after the pairs in every row tile) and 1 or 2 threads.
TEST(Matmul, KQuantRowPairsEqualAvx2Bitwise) {
    ASSERT_GE(cpu_simd_level(), SimdLevel::AVX2) << "this test needs at least AVX2";
    constexpr int64_t kRowsK = 23, kColsK = 5 * 256;
    ThreadPool pool1(1), pool2(2);
    MatmulScratch scratch;
    std::mt19937 rng(77);
    for (GGMLType t : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K}) {
        SCOPED_TRACE(type_name(t));
        auto w = random_weights(rng, t, kRowsK, kColsK);
        const WeightView W{t, kRowsK, kColsK, w.data()};
        constexpr int kMaxTok = 512;
        auto x = random_floats(rng, kMaxTok * kColsK);
        for (int i = 0; i < kColsK; ++i) x[9 * kColsK + i] *= 40.f;      // a token of large range
        std::fill(x.begin() + 4 * kColsK, x.begin() + 5 * kColsK, 0.f);  // an all-zero token
        std::vector<float> want(kMaxTok * kRowsK);
        {
            SimdCap cap(SimdLevel::AVX2);
            for (int tk = 0; tk < kMaxTok; ++tk) {
                matmul(W, x.data() + tk * kColsK, kColsK, 1, want.data() + tk * kRowsK, kRowsK,
                       pool1, scratch);
            }
        }
        std::vector<int> counts;
        for (int n = 1; n <= 17; ++n) counts.push_back(n);
        counts.push_back(64);
        counts.push_back(kMaxTok);
        for (SimdLevel level : runnable_levels()) {
            if (level == SimdLevel::Scalar) continue;
            SimdCap cap(level);
            for (int n : counts) {
                for (ThreadPool* pool : {&pool1, &pool2}) {
                    std::vector<float> y(n * kRowsK, NAN);
                    matmul(W, x.data(), kColsK, n, y.data(), kRowsK, *pool, scratch);
                    for (int i = 0; i < n * kRowsK; ++i) {
                        ASSERT_TRUE(same_bits(y[i], want[i]))
                            << simd_level_name(level) << " ntok " << n << " threads "
                            << pool->size() << " token " << i / kRowsK << " row " << i % kRowsK
                            << ": " << y[i] << " != " << want[i];
                    }
                }
            }
        }
    }
}

// The float types' tile kernels at prompt sizes: every token of a 300- or 512-token call (and of
// 1..17) has exactly the bits of a one-token call, for 1..3 threads, at every level.
TEST(Matmul, FloatTypesBatchInvariantUpTo512Tokens) {
    constexpr int kMaxTok = 512;
    ThreadPool pool1(1), pool2(2), pool3(3);
    MatmulScratch scratch;
    for (SimdLevel level : runnable_levels()) {
        SimdCap cap(level);
        for (GGMLType t : {GGMLType::F16, GGMLType::BF16, GGMLType::F32}) {
            SCOPED_TRACE(std::string(type_name(t)) + " at " + simd_level_name(level));
            Problem p = make_problem(t, kMaxTok, 321 + static_cast<uint32_t>(t));
            std::vector<float> single(kMaxTok * kRows);
            for (int tk = 0; tk < kMaxTok; ++tk) {
                matmul(p.W, p.x.data() + tk * kCols, kCols, 1, single.data() + tk * kRows, kRows,
                       pool1, scratch);
            }
            for (int n : {1, 2, 5, 9, 16, 17, 300, 512}) {
                for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
                    std::vector<float> y(n * kRows);
                    matmul(p.W, p.x.data(), kCols, n, y.data(), kRows, *pool, scratch);
                    ASSERT_EQ(std::memcmp(y.data(), single.data(), y.size() * sizeof(float)), 0)
                        << "ntok " << n << " threads " << pool->size();
                }
            }
        }
    }
}
