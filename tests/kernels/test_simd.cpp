// SIMD dot-product kernels: at every level this CPU runs, each kernel equals the scalar reference
// vec_dot_ref (integer parts exactly, float rounding within 1e-5 of the sum of |terms|) on random
// rows, for several row lengths and token counts, and is bit-identical whatever ntok is.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/quants.h"
#include "kernels/table.h"

using namespace specula;
using specula::test::random_floats;
using specula::test::random_weights;
using specula::test::runnable_levels;
using specula::test::weight_types;

namespace {

bool is_float_type(GGMLType t) {
    return t == GGMLType::F32 || t == GGMLType::F16 || t == GGMLType::BF16;
}

// Row lengths to try: ragged ones for the float types, 1..9 blocks for the block formats.
std::vector<int64_t> lengths(GGMLType t) {
    if (is_float_type(t)) return {1, 7, 8, 15, 16, 17, 33, 100, 773, 2048};
    const int64_t bs = type_traits(t).block_size;
    return {bs, 2 * bs, 3 * bs, 8 * bs, 9 * bs};
}

struct Case {
    std::vector<uint8_t> w;     // one weight row
    std::vector<uint8_t> acts;  // ntok activation rows, `stride` bytes apart (with padding)
    size_t stride = 0;
    std::vector<float> ref;  // vec_dot_ref per token
    std::vector<float> mag;  // sum over elements of |w * a| per token
};

Case make_case(GGMLType t, int64_t n, int ntok, std::mt19937& rng) {
    Case c;
    c.w = random_weights(rng, t, 1, n);
    const GGMLType at = vec_dot_type(t);
    const size_t rb = row_size(at, n);
    c.stride = rb + 8;  // padding between token rows: kernels must use the stride
    c.acts.assign(c.stride * ntok, 0xA5);
    std::vector<float> wf(n), af(n);
    dequantize_row(t, c.w.data(), wf.data(), n);
    for (int tk = 0; tk < ntok; ++tk) {
        // Some tokens have a large dynamic range, one is all zeros.
        const float scale = tk % 3 == 2 ? 30.f : 1.f;
        auto x = random_floats(rng, n, -scale, scale);
        if (tk == 4) std::fill(x.begin(), x.end(), 0.f);
        uint8_t* a = c.acts.data() + tk * c.stride;
        quantize_row(at, x.data(), a, n);
        dequantize_row(at, a, af.data(), n);
        double m = 0;
        for (int64_t i = 0; i < n; ++i) m += std::fabs(double(wf[i]) * af[i]);
        c.mag.push_back(static_cast<float>(m));
        c.ref.push_back(vec_dot_ref(t, n, c.w.data(), a));
    }
    return c;
}

}  // namespace

TEST(Simd, EveryTypeHasAKernelAtEveryRunnableLevel) {
    for (SimdLevel level : runnable_levels()) {
        for (GGMLType t : weight_types()) {
            EXPECT_NE(vec_dot_kernel(t, level), nullptr)
                << type_name(t) << " at " << simd_level_name(level);
        }
    }
    EXPECT_EQ(vec_dot_kernel(GGMLType::Q8_K, SimdLevel::AVX2), nullptr);
    EXPECT_EQ(vec_dot_kernel(GGMLType::IQ2_XXS, SimdLevel::AVX512), nullptr);
    ::testing::Test::RecordProperty("cpu_simd_level", simd_level_name(cpu_simd_level()));
}

TEST(Simd, KernelsEqualReference) {
    std::mt19937 rng(2024);
    constexpr int kTok = 7;
    for (SimdLevel level : runnable_levels()) {
        for (GGMLType t : weight_types()) {
            const VecDotFn fn = vec_dot_kernel(t, level);
            ASSERT_NE(fn, nullptr);
            for (int64_t n : lengths(t)) {
                SCOPED_TRACE(std::string(type_name(t)) + " at " + simd_level_name(level) +
                             " n=" + std::to_string(n));
                for (int rep = 0; rep < 3; ++rep) {
                    const Case c = make_case(t, n, kTok, rng);
                    std::vector<float> out(kTok, NAN);
                    fn(n, c.w.data(), c.acts.data(), c.stride, kTok, out.data());
                    for (int tk = 0; tk < kTok; ++tk) {
                        ASSERT_NEAR(out[tk], c.ref[tk], 1e-5 * c.mag[tk] + 1e-30)
                            << "token " << tk << " (sum |terms| " << c.mag[tk] << ")";
                    }
                }
            }
        }
    }
}

// out[t] does not depend on how many tokens share the call (nor on the token's position in it).
TEST(Simd, KernelsAreBatchInvariant) {
    std::mt19937 rng(77);
    constexpr int kTok = 16;
    for (SimdLevel level : runnable_levels()) {
        for (GGMLType t : weight_types()) {
            const VecDotFn fn = vec_dot_kernel(t, level);
            ASSERT_NE(fn, nullptr);
            const int64_t n = is_float_type(t) ? 777 : 4 * type_traits(t).block_size;
            SCOPED_TRACE(std::string(type_name(t)) + " at " + simd_level_name(level));
            const Case c = make_case(t, n, kTok, rng);
            std::vector<float> single(kTok);
            for (int tk = 0; tk < kTok; ++tk) {
                fn(n, c.w.data(), c.acts.data() + tk * c.stride, c.stride, 1, &single[tk]);
            }
            for (int ntok = 1; ntok <= kTok; ++ntok) {
                for (int first = 0; first + ntok <= kTok; first += 5) {
                    std::vector<float> out(ntok);
                    fn(n, c.w.data(), c.acts.data() + first * c.stride, c.stride, ntok, out.data());
                    ASSERT_EQ(std::memcmp(out.data(), &single[first], ntok * sizeof(float)), 0)
                        << "ntok " << ntok << " from token " << first;
                }
            }
        }
    }
}

// The K-quant kernels take tokens in balanced groups of up to 8 (Q4_K, Q5_K, Q6_K) or 4: every
// token count from 1 to 17 (so groups of every size, and 2 or 3 groups per call) over a 9
// super-block row gives each token the reference value and exactly its single-token bits.
TEST(Simd, KQuantTokenGroupsEqualReferenceAndSingleToken) {
    std::mt19937 rng(909);
    constexpr int kTok = 17;
    const GGMLType types[] = {GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::Q4_K,
                              GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::IQ4_XS};
    for (SimdLevel level : runnable_levels()) {
        for (GGMLType t : types) {
            const VecDotFn fn = vec_dot_kernel(t, level);
            ASSERT_NE(fn, nullptr);
            const int64_t n = 9 * type_traits(t).block_size;
            SCOPED_TRACE(std::string(type_name(t)) + " at " + simd_level_name(level));
            const Case c = make_case(t, n, kTok, rng);
            std::vector<float> single(kTok);
            for (int tk = 0; tk < kTok; ++tk) {
                fn(n, c.w.data(), c.acts.data() + tk * c.stride, c.stride, 1, &single[tk]);
                ASSERT_NEAR(single[tk], c.ref[tk], 1e-5 * c.mag[tk] + 1e-30) << "token " << tk;
            }
            for (int ntok = 1; ntok <= kTok; ++ntok) {
                std::vector<float> out(ntok, NAN);
                fn(n, c.w.data(), c.acts.data(), c.stride, ntok, out.data());
                ASSERT_EQ(std::memcmp(out.data(), single.data(), ntok * sizeof(float)), 0)
                    << "ntok " << ntok;
            }
        }
    }
}

// Weights whose every payload byte is 0xFF, 0x80 or 0x7F (largest quants, largest or most
// negative scales and mins) against activations of +-127: the widest intermediate sums, which
// must neither overflow nor saturate, for 1 and 8 tokens.
TEST(Simd, KQuantExtremeBlocksEqualReference) {
    std::mt19937 rng(31);
    const GGMLType types[] = {GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::Q4_K,
                              GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::IQ4_XS};
    constexpr int kTok = 8;
    for (SimdLevel level : runnable_levels()) {
        for (GGMLType t : types) {
            const VecDotFn fn = vec_dot_kernel(t, level);
            const int64_t n = 3 * type_traits(t).block_size;
            const GGMLType at = vec_dot_type(t);
            const size_t stride = row_size(at, n);
            std::vector<uint8_t> acts(stride * kTok);
            for (int tk = 0; tk < kTok; ++tk) {
                std::vector<float> x(n);
                for (int64_t i = 0; i < n; ++i) x[i] = (tk % 2 == 0 || i % 3 == 0) ? 1.f : -1.f;
                if (tk == 3) x[5] = -1.f;  // mixed signs in the first group
                quantize_row(at, x.data(), acts.data() + tk * stride, n);
            }
            for (uint8_t fillb : {uint8_t{0xFF}, uint8_t{0x80}, uint8_t{0x7F}}) {
                SCOPED_TRACE(std::string(type_name(t)) + " at " + simd_level_name(level) +
                             " bytes " + std::to_string(fillb));
                std::vector<uint8_t> w = random_weights(rng, t, 1, n);
                const auto f = specula::test::detail::scale_fields(t);
                const size_t bs = type_traits(t).type_size;
                for (size_t off = 0; off < w.size(); off += bs) {
                    for (size_t i = 0; i < bs; ++i) {
                        const bool scale_field =
                            (static_cast<int>(i) >= f.d && static_cast<int>(i) < f.d + 2) ||
                            (f.m >= 0 && static_cast<int>(i) >= f.m &&
                             static_cast<int>(i) < f.m + 2);
                        if (!scale_field) w[off + i] = fillb;
                    }
                }
                std::vector<float> wf(n), af(n);
                dequantize_row(t, w.data(), wf.data(), n);
                std::vector<float> out(kTok, NAN), one(1, NAN);
                fn(n, w.data(), acts.data(), stride, kTok, out.data());
                for (int tk = 0; tk < kTok; ++tk) {
                    const uint8_t* a = acts.data() + tk * stride;
                    dequantize_row(at, a, af.data(), n);
                    double mag = 0;
                    for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(wf[i]) * af[i]);
                    const float ref = vec_dot_ref(t, n, w.data(), a);
                    ASSERT_NEAR(out[tk], ref, 1e-5 * mag + 1e-30) << "token " << tk;
                    fn(n, w.data(), a, stride, 1, one.data());
                    ASSERT_EQ(std::memcmp(&one[0], &out[tk], sizeof(float)), 0) << "token " << tk;
                }
            }
        }
    }
}

// Zero-length rows and zero tokens are harmless no-ops.
TEST(Simd, EmptyCallsWriteNothing) {
    for (SimdLevel level : runnable_levels()) {
        for (GGMLType t : weight_types()) {
            const VecDotFn fn = vec_dot_kernel(t, level);
            float out[2] = {5.f, 5.f};
            fn(type_traits(t).block_size, nullptr, nullptr, 0, 0, out);
            EXPECT_EQ(out[0], 5.f);
        }
    }
}

// The AVX-512 build runs the same kernels with VNNI byte dot products, so on a CPU that has both
// levels the two agree bit for bit (here: every runnable level from AVX2 up against AVX2). The
// float types have their own 512-bit kernels (other summation order), tested below.
TEST(Simd, WideLevelsAgreeBitwiseWithAvx2) {
    std::mt19937 rng(5);
    constexpr int kTok = 5;
    int compared = 0;
    for (SimdLevel level : runnable_levels()) {
        if (level == SimdLevel::Scalar) continue;
        for (GGMLType t : weight_types()) {
            if (is_float_type(t) && level == SimdLevel::AVX512) continue;
            const int64_t n = is_float_type(t) ? 515 : 5 * type_traits(t).block_size;
            const Case c = make_case(t, n, kTok, rng);
            float base[kTok], out[kTok];
            vec_dot_kernel(t, SimdLevel::AVX2)(n, c.w.data(), c.acts.data(), c.stride, kTok, base);
            vec_dot_kernel(t, level)(n, c.w.data(), c.acts.data(), c.stride, kTok, out);
            EXPECT_EQ(std::memcmp(base, out, sizeof out), 0)
                << type_name(t) << " at " << simd_level_name(level);
            ++compared;
        }
    }
    if (cpu_simd_level() >= SimdLevel::AVX2) {
        EXPECT_GT(compared, 0);
    }
}

// The activation quantizers are bit-identical to quantize_row_ggml_cpu at every level: random
// rows, exact rounding ties, rows whose largest magnitude occurs with both signs, zero rows,
// tiny and huge values.
TEST(Simd, QuantizersMatchReferenceBitwise) {
    std::mt19937 rng(11);
    const GGMLType act_types[] = {GGMLType::Q8_0, GGMLType::Q8_1, GGMLType::Q8_K,
                                  GGMLType::F16,  GGMLType::BF16, GGMLType::F32};
    for (SimdLevel level : runnable_levels()) {
        specula::test::SimdCap cap(level);
        for (GGMLType at : act_types) {
            const QuantizeRowFn fn = best_quantize_row(at);
            ASSERT_NE(fn, nullptr) << type_name(at);
            const int64_t bs = type_traits(at).block_size;
            const int64_t n = bs == 1 ? 77 : 3 * bs;
            std::vector<std::vector<float>> rows;
            rows.push_back(random_floats(rng, n));
            rows.push_back(random_floats(rng, n, -1e-3f, 1e-3f));
            rows.push_back(random_floats(rng, n, -3e4f, 3e4f));
            rows.push_back(std::vector<float>(n, 0.f));
            std::vector<float> ties(n);  // amax 127 per block: x * id lands on .5 exactly
            for (int64_t i = 0; i < n; ++i) ties[i] = (i % 32 == 0) ? 127.f : float(i % 9) - 4.5f;
            rows.push_back(ties);
            std::vector<float> both = random_floats(rng, n);  // +m then -m in every block
            for (int64_t i = 0; i + bs <= n && bs > 1; i += bs) {
                both[i + 3] = 2.f;
                both[i + 1] = -2.f;
            }
            rows.push_back(both);
            std::vector<float> odd = random_floats(rng, n, -1e-38f, 1e-38f);  // subnormal-ish
            rows.push_back(odd);
            for (size_t k = 0; k < rows.size(); ++k) {
                const size_t bytes = row_size(at, n);
                std::vector<uint8_t> want(bytes, 0x11), got(bytes, 0x22);
                quantize_row_ggml_cpu(at, rows[k].data(), want.data(), n);
                fn(rows[k].data(), got.data(), n);
                EXPECT_EQ(want, got)
                    << type_name(at) << " row kind " << k << " at " << simd_level_name(level);
            }
        }
    }
}

// The AVX-512 two-row kernels (Q4_K, Q5_K, Q6_K) against the AVX2 one-row kernel, bit for bit:
// random rows and extreme ones (every payload byte 0xFF, 0x80 or 0x7F: largest quants, scales and
// mins, against activations of +-127 and a token of huge range), 1..17 tokens taken from several
// offsets, outputs written with a row stride other than 2.
TEST(Simd, RowPairKernelsEqualRowKernelBitwise) {
    ASSERT_GE(cpu_simd_level(), SimdLevel::AVX2) << "this test needs at least AVX2";
    std::mt19937 rng(8);
    constexpr int kTok = 17;
    constexpr size_t kLdy = 5;
    int compared = 0;
    for (GGMLType t : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K}) {
        if (cpu_simd_level() < SimdLevel::AVX512) continue;
        const Kernel* two = kernel_table().find(t, Layout::Rows, Isa::AVX512, TokenClass::Many);
        ASSERT_NE(two, nullptr) << type_name(t);
        const VecDotRows2Fn fn2 = two->rows2;
        ASSERT_NE(fn2, nullptr) << type_name(t);
        const VecDotFn one = vec_dot_kernel(t, SimdLevel::AVX2);
        for (int64_t n : {256, 768, 2304}) {
            for (int fill = -1; fill < 3; ++fill) {
                SCOPED_TRACE(std::string(type_name(t)) + " n " + std::to_string(n) + " fill " +
                             std::to_string(fill));
                const GGMLType at = vec_dot_type(t);
                const size_t stride = row_size(at, n) + 8;
                std::vector<uint8_t> acts(stride * kTok, 0xA5);
                for (int tk = 0; tk < kTok; ++tk) {
                    std::vector<float> x = random_floats(rng, n);
                    if (fill >= 0) {
                        for (int64_t i = 0; i < n; ++i) x[i] = (tk % 2 == 0 || i % 3 == 0) ? 1 : -1;
                    }
                    if (tk == 4) std::fill(x.begin(), x.end(), 0.f);
                    if (tk == 6) x[n / 2] = 1e4f;
                    quantize_row(at, x.data(), acts.data() + tk * stride, n);
                }
                std::vector<uint8_t> w = random_weights(rng, t, 2, n);
                if (fill >= 0) {
                    const uint8_t fb = fill == 0 ? 0xFF : fill == 1 ? 0x80 : 0x7F;
                    const auto f = specula::test::detail::scale_fields(t);
                    const size_t bs = type_traits(t).type_size;
                    for (size_t off = 0; off < w.size(); off += bs) {
                        for (size_t i = 0; i < bs; ++i) {
                            const int ii = static_cast<int>(i);
                            const bool scale = (ii >= f.d && ii < f.d + 2) ||
                                               (f.m >= 0 && ii >= f.m && ii < f.m + 2);
                            if (!scale) w[off + i] = fb;
                        }
                    }
                }
                const size_t rb = row_size(t, n);
                std::vector<float> want(2 * kTok);
                for (int r = 0; r < 2; ++r) {
                    for (int tk = 0; tk < kTok; ++tk) {
                        one(n, w.data() + r * rb, acts.data() + tk * stride, stride, 1,
                            &want[tk * 2 + r]);
                    }
                }
                for (int ntok = 1; ntok <= kTok; ++ntok) {
                    for (int first = 0; first + ntok <= kTok; first += 3) {
                        std::vector<float> y(ntok * kLdy, NAN);
                        fn2(n, w.data(), rb, acts.data() + first * stride, stride, ntok, y.data(),
                            kLdy);
                        for (int tk = 0; tk < ntok; ++tk) {
                            for (int r = 0; r < 2; ++r) {
                                ASSERT_EQ(std::memcmp(&y[tk * kLdy + r],
                                                      &want[(first + tk) * 2 + r], sizeof(float)),
                                          0)
                                    << "ntok " << ntok << " from " << first << " token " << tk
                                    << " row " << r << ": " << y[tk * kLdy + r]
                                    << " != " << want[(first + tk) * 2 + r];
                            }
                        }
                        ++compared;
                    }
                }
            }
        }
    }
    if (cpu_simd_level() >= SimdLevel::AVX512) {
        EXPECT_GT(compared, 0);
    }
}

// The float tile kernels (F32, F16, BF16) at AVX2 and AVX-512, several rows at once: every
// (row, token) output of every tile shape (1..13 rows, 1..17 tokens and 512, ragged lengths)
// equals the reference and has exactly the bits of the one-row, one-token VecDotFn call (which is
// the level's vec_dot kernel).
TEST(Simd, FloatRowsKernelEqualsReferenceAndSingleOutput) {
    int tested = 0;
    for (SimdLevel level : runnable_levels()) {
        if (level == SimdLevel::Scalar) continue;
        const bool avx2 = level == SimdLevel::AVX2;
        for (GGMLType t : {GGMLType::F32, GGMLType::F16, GGMLType::BF16}) {
            SCOPED_TRACE(simd_level_name(level));
            const Kernel* k = kernel_table().find(t, Layout::Rows, avx2 ? Isa::AVX2 : Isa::AVX512,
                                                  TokenClass::Any);
            ASSERT_NE(k, nullptr) << type_name(t);
            const FloatRowsFn rows = k->rows;
            const VecDotFn one = k->dot;
            ASSERT_NE(rows, nullptr) << type_name(t);
            EXPECT_EQ(vec_dot_kernel(t, level), one);
            ++tested;
            std::mt19937 rng(4242 + static_cast<int>(t));
            for (int64_t n : {1, 15, 16, 17, 100, 2048}) {
                constexpr int kRowsMax = 13;
                const int ntok_max = n <= 100 ? 512 : 17;
                SCOPED_TRACE(std::string(type_name(t)) + " n=" + std::to_string(n));
                const Case c = make_case(t, n, ntok_max, rng);
                std::vector<uint8_t> w = random_weights(rng, t, kRowsMax, n);
                const size_t rb = row_size(t, n);
                std::memcpy(w.data(), c.w.data(), rb);  // row 0 is the case's row
                // single[t][r]: one row, one token.
                std::vector<float> single(static_cast<size_t>(ntok_max) * kRowsMax);
                for (int tk = 0; tk < ntok_max; ++tk) {
                    for (int r = 0; r < kRowsMax; ++r) {
                        one(n, w.data() + r * rb, c.acts.data() + tk * c.stride, c.stride, 1,
                            &single[tk * kRowsMax + r]);
                    }
                }
                // Against the reference, for the first 17 tokens (make_case's ref is for row 0).
                for (int tk = 0; tk < 17 && tk < ntok_max; ++tk) {
                    ASSERT_NEAR(single[tk * kRowsMax], c.ref[tk], 1e-5 * c.mag[tk] + 1e-30);
                }
                std::vector<int> counts;
                for (int k = 1; k <= 17; ++k) counts.push_back(k);
                if (ntok_max == 512) counts.push_back(512);
                for (int nrows : {1, 2, 3, 5, 8, 9, 13}) {
                    for (int ntok : counts) {
                        const int64_t ldy = kRowsMax + 3;
                        std::vector<float> y(static_cast<size_t>(ntok) * ldy, -1.f);
                        rows(n, w.data(), rb, nrows, c.acts.data(), c.stride, ntok, y.data(), ldy);
                        for (int tk = 0; tk < ntok; ++tk) {
                            for (int r = 0; r < ldy; ++r) {
                                const float got = y[tk * ldy + r];
                                if (r >= nrows) {
                                    ASSERT_EQ(got, -1.f) << "wrote past row " << nrows;
                                    continue;
                                }
                                ASSERT_EQ(std::memcmp(&got, &single[tk * kRowsMax + r], 4), 0)
                                    << nrows << " rows x " << ntok << " tokens: row " << r
                                    << " token " << tk;
                            }
                        }
                    }
                }
            }
        }
    }
    if (cpu_simd_level() >= SimdLevel::AVX2) {
        EXPECT_GT(tested, 0);
    }
}
