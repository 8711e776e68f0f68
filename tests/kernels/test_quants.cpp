// Tests of the scalar reference kernels (kernels/quants.h) on real data:
//  * every tensor of the synthetic quantisation ladder, dequantized, is close to the same tensor
//    of the F32 master (a wrong nibble order or scale layout gives errors of order 1);
//  * our round-to-nearest quantizers (F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) reproduce
//    llama-quantize's bytes exactly from the F32 master;
//  * vec_dot_ref(w, quantize(x)) equals the float dot of the dequantized operands, and is close
//    to dot(dequant(w), x);
//  * the activation quantizers Q8_0, Q8_1, Q8_K meet their round-trip bounds, Q8_K's bsums are
//    right and all-zero blocks give zeros; quantize_row_ggml_cpu rounds ties to even;
//  * unsupported types, bad row lengths and non-finite inputs are handled (Error / no UB).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/quants.h"
#include "test_util.h"

namespace specula {
namespace {

const std::string kLadderDir = "models/synthetic/rand-llama-tok512-d256-l2-";

std::unique_ptr<GGUFFile> open_ladder(const std::string& suffix) {
    return GGUFFile::open(test::shared_path(kLadderDir + suffix + ".gguf"));
}

const GGUFFile& master() {
    static std::unique_ptr<GGUFFile> f = open_ladder("F32");
    return *f;
}

std::vector<float> dequantize_tensor(const GGUFTensor& t) {
    std::vector<float> out(static_cast<size_t>(t.n_elements()));
    const int64_t n0 = t.ne[0];
    const size_t rs = row_size(t.type, n0);
    for (int64_t r = 0; r < t.n_rows(); ++r) {
        dequantize_row(t.type, t.data + r * rs, out.data() + r * n0, n0);
    }
    return out;
}

// RMS of (a - b) divided by the RMS of b.
double relative_rms_error(const std::vector<float>& a, const std::vector<float>& b) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        err += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        ref += double(b[i]) * b[i];
    }
    return std::sqrt(err / ref);
}

// Bounds on the relative RMS dequantization error of the ladder's Gaussian weights, per tensor
// type. Measured (min..max over all tensors of that type): F16 2.07e-4..2.10e-4, BF16
// 1.65e-3..1.68e-3, Q8_0 5.33e-3..5.37e-3, Q6_K 1.77e-2..1.81e-2, Q5_0 4.25e-2..4.28e-2, Q5_1
// 3.77e-2..3.80e-2, Q5_K 3.59e-2..3.62e-2, Q4_0 8.56e-2..8.63e-2, Q4_1 7.79e-2..7.85e-2, Q4_K
// 7.11e-2..7.16e-2, IQ4_NL 7.58e-2..7.64e-2, IQ4_XS 7.64e-2..7.70e-2, Q3_K 0.150..0.151, Q2_K
// 0.295..0.299. Each bound is ~1.25x the largest; a wrong nibble order, bit plane or scale layout
// gives errors near or above 1.
double error_bound(GGMLType t) {
    switch (t) {
        case GGMLType::F32:
            return 0.0;
        case GGMLType::F16:
            return 2.6e-4;
        case GGMLType::BF16:
            return 2.1e-3;
        case GGMLType::Q8_0:
            return 6.7e-3;
        case GGMLType::Q6_K:
            return 2.3e-2;
        case GGMLType::Q5_0:
            return 5.3e-2;
        case GGMLType::Q5_1:
            return 4.8e-2;
        case GGMLType::Q5_K:
            return 4.5e-2;
        case GGMLType::Q4_0:
            return 0.108;
        case GGMLType::Q4_1:
            return 0.098;
        case GGMLType::Q4_K:
            return 0.09;
        case GGMLType::IQ4_NL:
            return 0.095;
        case GGMLType::IQ4_XS:
            return 0.096;
        case GGMLType::Q3_K:
            return 0.19;
        case GGMLType::Q2_K:
            return 0.37;
        default:
            return -1;
    }
}

class LadderTest : public ::testing::TestWithParam<std::pair<std::string, GGMLType>> {};

// Every tensor of the file dequantizes to within its type's bound of the F32 master, and the
// file's main type (the one named in the file name) is present.
TEST_P(LadderTest, DequantizedTensorsMatchF32Master) {
    const auto& [suffix, main_type] = GetParam();
    auto file = open_ladder(suffix);
    int n_main = 0;
    std::map<std::string, double> worst;  // per tensor type, printed as the measured figures
    ASSERT_EQ(file->tensors().size(), master().tensors().size());
    for (const GGUFTensor& t : file->tensors()) {
        const GGUFTensor& m = master().tensor(t.name);
        ASSERT_EQ(m.type, GGMLType::F32) << m.name;
        ASSERT_EQ(t.ne, m.ne) << t.name;
        const double bound = error_bound(t.type);
        ASSERT_GE(bound, 0.0) << t.name << ": unexpected type " << type_name(t.type);
        const double err = relative_rms_error(dequantize_tensor(t), dequantize_tensor(m));
        EXPECT_LE(err, bound) << suffix << " " << t.name << " (" << type_name(t.type) << ")";
        auto& w = worst[std::string(type_name(t.type))];
        w = std::max(w, err);
        if (t.type == main_type) ++n_main;
    }
    for (const auto& [type, err] : worst) {
        std::printf("  %-7s %-5s max relative rms error %.3g\n", suffix.c_str(), type.c_str(), err);
    }
    EXPECT_GT(n_main, 0) << suffix << " has no tensor of type " << type_name(main_type);
}

INSTANTIATE_TEST_SUITE_P(Quants, LadderTest,
                         ::testing::Values(std::pair{std::string("F16"), GGMLType::F16},
                                           std::pair{std::string("BF16"), GGMLType::BF16},
                                           std::pair{std::string("Q8_0"), GGMLType::Q8_0},
                                           std::pair{std::string("Q4_0"), GGMLType::Q4_0},
                                           std::pair{std::string("Q4_1"), GGMLType::Q4_1},
                                           std::pair{std::string("Q5_0"), GGMLType::Q5_0},
                                           std::pair{std::string("Q5_1"), GGMLType::Q5_1},
                                           std::pair{std::string("Q2_K"), GGMLType::Q2_K},
                                           std::pair{std::string("Q3_K_M"), GGMLType::Q3_K},
                                           std::pair{std::string("Q4_K_M"), GGMLType::Q4_K},
                                           std::pair{std::string("Q5_K_M"), GGMLType::Q5_K},
                                           std::pair{std::string("Q6_K"), GGMLType::Q6_K},
                                           std::pair{std::string("IQ4_NL"), GGMLType::IQ4_NL},
                                           std::pair{std::string("IQ4_XS"), GGMLType::IQ4_XS}),
                         [](const auto& info) { return info.param.first; });

// llama-quantize without an imatrix uses ggml's round-to-nearest reference quantizers for these
// types, so quantizing the F32 master ourselves must give the file's bytes exactly.
class ExactQuantizeTest : public ::testing::TestWithParam<std::pair<std::string, GGMLType>> {};

TEST_P(ExactQuantizeTest, ReproducesLlamaQuantizeBytes) {
    const auto& [suffix, type] = GetParam();
    auto file = open_ladder(suffix);
    int n_checked = 0;
    for (const GGUFTensor& t : file->tensors()) {
        if (t.type != type) continue;
        const GGUFTensor& m = master().tensor(t.name);
        const int64_t n0 = t.ne[0];
        const size_t rs = row_size(type, n0);
        std::vector<uint8_t> row(rs);
        int64_t bad_rows = 0;
        for (int64_t r = 0; r < t.n_rows(); ++r) {
            quantize_row(type, reinterpret_cast<const float*>(m.data) + r * n0, row.data(), n0);
            if (std::memcmp(row.data(), t.data + r * rs, rs) != 0) ++bad_rows;
        }
        EXPECT_EQ(bad_rows, 0) << suffix << " " << t.name << ": rows differing from the file";
        ++n_checked;
    }
    EXPECT_GT(n_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Quants, ExactQuantizeTest,
                         ::testing::Values(std::pair{std::string("F16"), GGMLType::F16},
                                           std::pair{std::string("BF16"), GGMLType::BF16},
                                           std::pair{std::string("Q8_0"), GGMLType::Q8_0},
                                           std::pair{std::string("Q4_0"), GGMLType::Q4_0},
                                           std::pair{std::string("Q4_1"), GGMLType::Q4_1},
                                           std::pair{std::string("Q5_0"), GGMLType::Q5_0},
                                           std::pair{std::string("Q5_1"), GGMLType::Q5_1}),
                         [](const auto& info) { return info.param.first; });

// ---- vec_dot_ref --------------------------------------------------------------------------------

std::vector<float> random_gaussian(int64_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = dist(rng);
    return v;
}

double dot_double(const float* a, const float* b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += double(a[i]) * b[i];
    return s;
}

double dot_abs(const float* a, const float* b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::fabs(double(a[i]) * b[i]);
    return s;
}

// dot(dequant(w), dequant(a)) in double, except that for Q8_1 activations (Q4_1/Q5_1 weights) the
// offset term of each block uses the stored s = fp16(d * sum(q)) as ggml does: sum over blocks of
// dot(w - m, a) + m * s.
double expected_dot(GGMLType wt, const uint8_t* w, const std::vector<float>& wf, const void* a,
                    const std::vector<float>& af) {
    const int64_t n = wf.size();
    if (vec_dot_type(wt) != GGMLType::Q8_1) return dot_double(wf.data(), af.data(), n);
    const auto* qa = static_cast<const block_q8_1*>(a);
    const size_t bytes = type_traits(wt).type_size;  // block_q4_1 / block_q5_1: d, m first
    double sum = 0;
    for (int64_t b = 0; b < n / QK8_1; ++b) {
        fp16_t m16;
        std::memcpy(&m16, w + b * bytes + sizeof(fp16_t), sizeof(m16));
        const double m = fp16_to_fp32(m16);
        for (int j = 0; j < QK8_1; ++j) sum += (wf[b * QK8_1 + j] - m) * af[b * QK8_1 + j];
        sum += m * fp16_to_fp32(qa[b].s);
    }
    return sum;
}

// Relative tolerance of dot(dequant(w), x) vs vec_dot_ref, scaled by sum |w_i x_i|: the activation
// rounding to vec_dot_type (8 bits, or 16 for F16/BF16, none for F32).
double activation_tolerance(GGMLType act) {
    switch (act) {
        case GGMLType::F32:
            return 1e-6;
        case GGMLType::F16:
            return 1e-3;
        case GGMLType::BF16:
            return 8e-3;
        default:
            return 1.5e-2;
    }
}

// Weight rows of each supported type, taken from the ladder files (the first tensor of that type
// found), checked row by row against random activations.
class VecDotTest : public ::testing::TestWithParam<std::pair<std::string, GGMLType>> {};

TEST_P(VecDotTest, MatchesDotOfDequantizedOperands) {
    const auto& [suffix, type] = GetParam();
    auto file = open_ladder(suffix);
    const GGUFTensor* w = nullptr;
    for (const GGUFTensor& t : file->tensors()) {
        if (t.type == type) {
            w = &t;
            break;
        }
    }
    ASSERT_NE(w, nullptr) << suffix << " has no " << type_name(type) << " tensor";
    const int64_t n = w->ne[0];
    const size_t rs = row_size(type, n);
    const GGMLType act = vec_dot_type(type);
    std::vector<uint8_t> qa(row_size(act, n));
    std::vector<float> wf(n), af(n);
    const int64_t n_rows = std::min<int64_t>(w->n_rows(), 64);
    for (int64_t r = 0; r < n_rows; ++r) {
        const auto x = random_gaussian(n, 1000 + static_cast<uint32_t>(r), r % 2 ? 0.1f : 3.0f);
        quantize_row(act, x.data(), qa.data(), n);
        dequantize_row(act, qa.data(), af.data(), n);
        dequantize_row(type, w->data + r * rs, wf.data(), n);
        const float got = vec_dot_ref(type, n, w->data + r * rs, qa.data());
        const double scale = dot_abs(wf.data(), af.data(), n);
        // Against the dequantized operands the difference is float rounding only.
        EXPECT_NEAR(got, expected_dot(type, w->data + r * rs, wf, qa.data(), af),
                    2e-5 * scale + 1e-30)
            << type_name(type) << " row " << r;
        // Against the unquantized activations: bounded by the activation rounding.
        EXPECT_NEAR(got, dot_double(wf.data(), x.data(), n),
                    activation_tolerance(act) * dot_abs(wf.data(), x.data(), n))
            << type_name(type) << " row " << r;
    }
}

INSTANTIATE_TEST_SUITE_P(Quants, VecDotTest,
                         ::testing::Values(std::pair{std::string("F32"), GGMLType::F32},
                                           std::pair{std::string("F16"), GGMLType::F16},
                                           std::pair{std::string("BF16"), GGMLType::BF16},
                                           std::pair{std::string("Q8_0"), GGMLType::Q8_0},
                                           std::pair{std::string("Q4_0"), GGMLType::Q4_0},
                                           std::pair{std::string("Q4_1"), GGMLType::Q4_1},
                                           std::pair{std::string("Q5_0"), GGMLType::Q5_0},
                                           std::pair{std::string("Q5_1"), GGMLType::Q5_1},
                                           std::pair{std::string("Q2_K"), GGMLType::Q2_K},
                                           std::pair{std::string("Q3_K_M"), GGMLType::Q3_K},
                                           std::pair{std::string("Q4_K_M"), GGMLType::Q4_K},
                                           std::pair{std::string("Q5_K_M"), GGMLType::Q5_K},
                                           std::pair{std::string("Q6_K"), GGMLType::Q6_K},
                                           std::pair{std::string("IQ4_NL"), GGMLType::IQ4_NL},
                                           std::pair{std::string("IQ4_XS"), GGMLType::IQ4_XS}),
                         [](const auto& info) {
                             return std::string(type_name(info.param.second));
                         });

// ---- activation quantizers ----------------------------------------------------------------------

// Rows of the F32 master (real data) plus a scaled random row, 1024 elements each.
std::vector<std::vector<float>> activation_rows() {
    std::vector<std::vector<float>> rows;
    const GGUFTensor& t = master().tensor("blk.0.ffn_down.weight");
    const float* p = reinterpret_cast<const float*>(t.data);
    for (int r = 0; r < 4; ++r) rows.emplace_back(p + r * 1024, p + (r + 1) * 1024);
    rows.push_back(random_gaussian(1024, 7, 50.0f));
    return rows;
}

TEST(ActivationQuant, Q8_0RoundTrip) {
    for (const auto& x : activation_rows()) {
        const int64_t n = x.size();
        std::vector<block_q8_0> q(n / QK8_0);
        std::vector<float> y(n);
        quantize_row(GGMLType::Q8_0, x.data(), q.data(), n);
        dequantize_row(GGMLType::Q8_0, q.data(), y.data(), n);
        for (int64_t b = 0; b < n / QK8_0; ++b) {
            float amax = 0;
            for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[b * QK8_0 + j]));
            const float d = amax / 127;
            EXPECT_EQ(q[b].d, fp32_to_fp16(d));
            // Half a step of rounding plus the fp16 rounding of d (relative 2^-11) at |q| <= 127.
            const float tol = 0.5f * d + 127 * d * (1.0f / 2048) + 1e-12f;
            for (int j = 0; j < QK8_0; ++j) {
                EXPECT_NEAR(y[b * QK8_0 + j], x[b * QK8_0 + j], tol);
                EXPECT_LE(std::abs(int(q[b].qs[j])), 127);
            }
        }
    }
}

TEST(ActivationQuant, Q8_1SumMatchesValues) {
    for (const auto& x : activation_rows()) {
        const int64_t n = x.size();
        std::vector<block_q8_1> q1(n / QK8_1);
        std::vector<block_q8_0> q0(n / QK8_0);
        quantize_row(GGMLType::Q8_1, x.data(), q1.data(), n);
        quantize_row(GGMLType::Q8_0, x.data(), q0.data(), n);
        for (int64_t b = 0; b < n / QK8_1; ++b) {
            // Same d and values as Q8_0.
            EXPECT_EQ(q1[b].d, q0[b].d);
            EXPECT_EQ(std::memcmp(q1[b].qs, q0[b].qs, QK8_1), 0);
            int sum = 0;
            for (int j = 0; j < QK8_1; ++j) sum += q1[b].qs[j];
            float amax = 0;
            for (int j = 0; j < QK8_1; ++j) amax = std::max(amax, std::fabs(x[b * QK8_1 + j]));
            EXPECT_EQ(q1[b].s, fp32_to_fp16(sum * (amax / 127)));
        }
    }
}

TEST(ActivationQuant, Q8_KRoundTripAndBsums) {
    for (const auto& x : activation_rows()) {
        const int64_t n = x.size();
        std::vector<block_q8_K> q(n / QK_K);
        std::vector<float> y(n);
        quantize_row(GGMLType::Q8_K, x.data(), q.data(), n);
        dequantize_row(GGMLType::Q8_K, q.data(), y.data(), n);
        for (int64_t b = 0; b < n / QK_K; ++b) {
            const float* xb = x.data() + b * QK_K;
            float amax = 0, max = 0;
            for (int j = 0; j < QK_K; ++j) {
                if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), max = xb[j];
            }
            EXPECT_NEAR(q[b].d, -max / 127, 1e-6f * amax);
            for (int g = 0; g < QK_K / 16; ++g) {
                int sum = 0;
                for (int j = 0; j < 16; ++j) sum += q[b].qs[16 * g + j];
                EXPECT_EQ(q[b].bsums[g], sum) << "block " << b << " group " << g;
            }
            bool has_extreme = false;
            for (int j = 0; j < QK_K; ++j) {
                EXPECT_NEAR(y[b * QK_K + j], xb[j], 0.5001f * std::fabs(q[b].d));
                has_extreme |= q[b].qs[j] == -127;  // the largest-magnitude value maps to -127
            }
            EXPECT_TRUE(has_extreme);
        }
    }
}

TEST(ActivationQuant, ZeroBlocksGiveZeros) {
    std::vector<float> x = random_gaussian(2 * QK_K, 11);
    std::fill(x.begin(), x.begin() + QK_K, 0.0f);                 // first Q8_K block all zero
    std::fill(x.begin() + QK_K, x.begin() + QK_K + QK8_0, 0.0f);  // one zero Q8_0 block too
    std::vector<block_q8_K> qk(2);
    std::memset(qk.data(), 0x5A, sizeof(block_q8_K) * qk.size());
    quantize_row(GGMLType::Q8_K, x.data(), qk.data(), 2 * QK_K);
    EXPECT_EQ(qk[0].d, 0.0f);
    for (int j = 0; j < QK_K; ++j) EXPECT_EQ(qk[0].qs[j], 0);
    for (int g = 0; g < QK_K / 16; ++g) EXPECT_EQ(qk[0].bsums[g], 0);
    EXPECT_NE(qk[1].d, 0.0f);

    std::vector<block_q8_0> q0(2 * QK_K / QK8_0);
    quantize_row(GGMLType::Q8_0, x.data(), q0.data(), 2 * QK_K);
    for (int b = 0; b < QK_K / QK8_0 + 1; ++b) {
        EXPECT_EQ(fp16_to_fp32(q0[b].d), 0.0f);
        for (int j = 0; j < QK8_0; ++j) EXPECT_EQ(q0[b].qs[j], 0);
    }
    std::vector<float> y(2 * QK_K);
    dequantize_row(GGMLType::Q8_K, qk.data(), y.data(), 2 * QK_K);
    for (int j = 0; j < QK_K; ++j) EXPECT_EQ(y[j], 0.0f);
}

// The CPU-backend flavour rounds ties to even and uses id = 127 / amax; the reference rounds ties
// away from zero. With amax = 127 (d = 1) every x.5 is an exact tie.
TEST(ActivationQuant, GgmlCpuRoundsTiesToEven) {
    std::vector<float> x(QK8_0, 0.0f);
    const float in[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -3.5f, 126.5f};
    const int cpu[] = {127, 0, 2, 2, 0, -2, -4, 126};
    const int refq[] = {127, 1, 2, 3, -1, -3, -4, 127};
    std::copy(std::begin(in), std::end(in), x.begin());
    for (GGMLType t : {GGMLType::Q8_0, GGMLType::Q8_1}) {
        std::vector<uint8_t> a(row_size(t, QK8_0)), b(row_size(t, QK8_0));
        quantize_row_ggml_cpu(t, x.data(), a.data(), QK8_0);
        quantize_row(t, x.data(), b.data(), QK8_0);
        const size_t off = t == GGMLType::Q8_0 ? 2 : 4;  // qs follow d (and s)
        const auto* qa = reinterpret_cast<const int8_t*>(a.data() + off);
        const auto* qb = reinterpret_cast<const int8_t*>(b.data() + off);
        for (size_t j = 0; j < std::size(in); ++j) {
            EXPECT_EQ(qa[j], cpu[j]) << type_name(t) << " x=" << in[j];
            EXPECT_EQ(qb[j], refq[j]) << type_name(t) << " x=" << in[j];
        }
        EXPECT_EQ(std::memcmp(a.data(), b.data(), 2), 0);  // same d
    }
    std::vector<block_q8_1> q1(1);
    quantize_row_ggml_cpu(GGMLType::Q8_1, x.data(), q1.data(), QK8_0);
    EXPECT_EQ(fp16_to_fp32(q1[0].s), 127.0f + 0 + 2 + 2 + 0 - 2 - 4 + 126);
}

// On real rows the two flavours agree except on rare elements, and then by one step.
TEST(ActivationQuant, GgmlCpuCloseToReference) {
    int64_t total = 0, differ = 0;
    for (const auto& x : activation_rows()) {
        const int64_t n = x.size();
        std::vector<block_q8_0> a(n / QK8_0), b(n / QK8_0);
        quantize_row_ggml_cpu(GGMLType::Q8_0, x.data(), a.data(), n);
        quantize_row(GGMLType::Q8_0, x.data(), b.data(), n);
        for (int64_t i = 0; i < n / QK8_0; ++i) {
            EXPECT_EQ(a[i].d, b[i].d);
            for (int j = 0; j < QK8_0; ++j) {
                EXPECT_LE(std::abs(a[i].qs[j] - b[i].qs[j]), 1);
                differ += a[i].qs[j] != b[i].qs[j];
                ++total;
            }
        }
    }
    EXPECT_LE(differ, total / 1000);
    // Types other than Q8_0/Q8_1 are rounded exactly as quantize_row does.
    const auto x = random_gaussian(QK_K, 9);
    for (GGMLType t : {GGMLType::Q8_K, GGMLType::F16, GGMLType::BF16, GGMLType::F32}) {
        std::vector<uint8_t> a(row_size(t, QK_K)), b(row_size(t, QK_K));
        quantize_row_ggml_cpu(t, x.data(), a.data(), QK_K);
        quantize_row(t, x.data(), b.data(), QK_K);
        EXPECT_EQ(a, b) << type_name(t);
    }
}

TEST(ActivationQuant, HalfFloatRoundTrip) {
    const auto x = random_gaussian(1024, 3, 10.0f);
    std::vector<uint16_t> h(1024);
    std::vector<float> y(1024);
    for (auto [t, rel] : {std::pair{GGMLType::F16, 1.0f / 2048}, {GGMLType::BF16, 1.0f / 256}}) {
        quantize_row(t, x.data(), h.data(), 1024);
        dequantize_row(t, h.data(), y.data(), 1024);
        for (int i = 0; i < 1024; ++i) EXPECT_NEAR(y[i], x[i], rel * std::fabs(x[i]) + 1e-7f);
    }
}

// Q4_0 / Q5_0 / Q4_1 / Q5_1 round trips on random data: error within one quantization step.
TEST(WeightQuant, RoundTripWithinOneStep) {
    const auto x = random_gaussian(4096, 5);
    std::vector<float> y(x.size());
    for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1}) {
        std::vector<uint8_t> q(row_size(t, x.size()));
        quantize_row(t, x.data(), q.data(), x.size());
        dequantize_row(t, q.data(), y.data(), x.size());
        const int levels = (t == GGMLType::Q4_0 || t == GGMLType::Q4_1) ? 15 : 31;
        for (size_t b = 0; b < x.size() / 32; ++b) {
            const auto [mn, mx] = std::minmax_element(x.begin() + b * 32, x.begin() + b * 32 + 32);
            const float step = 2 * std::max(std::fabs(*mn), std::fabs(*mx)) / levels;
            for (size_t j = b * 32; j < b * 32 + 32; ++j) {
                EXPECT_NEAR(y[j], x[j], 1.1f * step) << type_name(t) << " element " << j;
            }
        }
    }
}

// ---- errors -------------------------------------------------------------------------------------

TEST(QuantErrors, UnsupportedTypesThrowNamingTheType) {
    float f[256] = {};
    uint8_t buf[1024] = {};
    try {
        dequantize_row(GGMLType::IQ2_XXS, buf, f, 256);
        FAIL() << "no throw";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
    }
    EXPECT_THROW(quantize_row(GGMLType::Q4_K, f, buf, 256), Error);
    EXPECT_THROW(vec_dot_ref(GGMLType::Q8_K, 256, buf, buf), Error);
    EXPECT_THROW(vec_dot_type(GGMLType::I32), Error);
    EXPECT_THROW(dequantize_row(static_cast<GGMLType>(4), buf, f, 32), Error);
    EXPECT_THROW(dequantize_row(static_cast<GGMLType>(1000), buf, f, 32), Error);
}

// Rows holding Inf/NaN (e.g. from a file with corrupt weights) must not trip UB or crash; the
// finite blocks next to them are quantized normally.
TEST(QuantErrors, NonFiniteInputsDoNotCrash) {
    auto x = random_gaussian(2 * QK_K, 21);
    x[3] = INFINITY;
    x[40] = NAN;
    x[70] = -INFINITY;
    std::vector<float> y(x.size());
    for (GGMLType t :
         {GGMLType::F16, GGMLType::BF16, GGMLType::Q8_0, GGMLType::Q8_1, GGMLType::Q8_K,
          GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1}) {
        std::vector<uint8_t> q(row_size(t, x.size()));
        quantize_row(t, x.data(), q.data(), x.size());
        quantize_row_ggml_cpu(t, x.data(), q.data(), x.size());
        dequantize_row(t, q.data(), y.data(), x.size());
        // The last Q8_K block / 32-block is all finite and round-trips closely.
        for (size_t j = x.size() - 32; j < x.size(); ++j) {
            EXPECT_NEAR(y[j], x[j], 0.5f) << type_name(t);
        }
    }
}

// MXFP4 as the OCP microscaling spec defines it: E2M1 codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6
// (8..15 the same, negative), times 2^(E8M0 - 127); low nibbles are elements 0..15, high 16..31.
TEST(Mxfp4, DequantizesAsTheOcpSpec) {
    EXPECT_EQ(type_traits(GGMLType::MXFP4).type_size, 17u);
    EXPECT_EQ(type_traits(GGMLType::MXFP4).block_size, 32);
    EXPECT_EQ(type_name(GGMLType::MXFP4), "MXFP4");
    const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int e : {0, 1, 2, 100, 127, 130, 254}) {
        block_mxfp4 b{};
        b.e = static_cast<uint8_t>(e);
        for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
        float y[32];
        dequantize_row(GGMLType::MXFP4, &b, y, 32);
        const float scale = std::ldexp(1.0f, e - 127);
        for (int j = 0; j < 16; ++j) {
            EXPECT_EQ(y[j], e2m1[j] * scale) << "e " << e << " element " << j;
            EXPECT_EQ(y[j + 16], e2m1[15 - j] * scale) << "e " << e << " element " << j + 16;
        }
    }
}

// The quantizer (ggml's round to nearest) picks the exponent that puts the block's largest
// magnitude in [4, 8) x 2^(e - 127) and reproduces values that are on the grid exactly; its
// error on random data is bounded; the reference dot product equals the dequantized one.
TEST(Mxfp4, QuantizerAndDotProduct) {
    float x[64];
    const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int j = 0; j < 64; ++j) x[j] = (j % 2 ? -1.f : 1.f) * grid[j % 8] * 0.25f;
    block_mxfp4 q[2];
    quantize_row(GGMLType::MXFP4, x, q, 64);
    EXPECT_EQ(q[0].e, 125);  // amax 1.5 = 6 * 2^-2: e = floor(log2 1.5) - 2 + 127
    float y[64];
    dequantize_row(GGMLType::MXFP4, q, y, 64);
    for (int j = 0; j < 64; ++j) EXPECT_EQ(y[j], x[j]) << j;

    std::mt19937 rng(3);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> v(4096), back(4096);
    for (auto& f : v) f = g(rng);
    std::vector<uint8_t> buf(row_size(GGMLType::MXFP4, 4096));
    quantize_row(GGMLType::MXFP4, v.data(), buf.data(), 4096);
    dequantize_row(GGMLType::MXFP4, buf.data(), back.data(), 4096);
    const double err = relative_rms_error(back, v);
    EXPECT_GT(err, 0.05);  // 4 bits with a power-of-two scale: 0.115 (numpy, 32k values)
    EXPECT_LT(err, 0.2);

    std::vector<float> a(4096), ad(4096);
    for (auto& f : a) f = g(rng);
    std::vector<uint8_t> aq(row_size(GGMLType::Q8_0, 4096));
    quantize_row(GGMLType::Q8_0, a.data(), aq.data(), 4096);
    dequantize_row(GGMLType::Q8_0, aq.data(), ad.data(), 4096);
    double want = 0, mag = 0;
    for (int i = 0; i < 4096; ++i) {
        want += double(back[i]) * ad[i];
        mag += std::fabs(double(back[i]) * ad[i]);
    }
    EXPECT_NEAR(vec_dot_ref(GGMLType::MXFP4, 4096, buf.data(), aq.data()), want, 1e-5 * mag);
}

TEST(QuantErrors, RowLengthMustBeAMultipleOfTheBlock) {
    float f[256] = {};
    uint8_t buf[1024] = {};
    EXPECT_THROW(dequantize_row(GGMLType::Q4_K, buf, f, 100), Error);
    EXPECT_THROW(quantize_row(GGMLType::Q8_0, f, buf, 33), Error);
    EXPECT_THROW(vec_dot_ref(GGMLType::Q8_0, 48, buf, buf), Error);
}

TEST(VecDotType, MatchesGgml) {
    EXPECT_EQ(vec_dot_type(GGMLType::F32), GGMLType::F32);
    EXPECT_EQ(vec_dot_type(GGMLType::F16), GGMLType::F16);
    EXPECT_EQ(vec_dot_type(GGMLType::BF16), GGMLType::BF16);
    for (GGMLType t :
         {GGMLType::Q4_0, GGMLType::Q5_0, GGMLType::Q8_0, GGMLType::IQ4_NL, GGMLType::MXFP4}) {
        EXPECT_EQ(vec_dot_type(t), GGMLType::Q8_0) << type_name(t);
    }
    for (GGMLType t : {GGMLType::Q4_1, GGMLType::Q5_1}) {
        EXPECT_EQ(vec_dot_type(t), GGMLType::Q8_1) << type_name(t);
    }
    for (GGMLType t : {GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::Q4_K, GGMLType::Q5_K,
                       GGMLType::Q6_K, GGMLType::IQ4_XS}) {
        EXPECT_EQ(vec_dot_type(t), GGMLType::Q8_K) << type_name(t);
    }
}

}  // namespace
}  // namespace specula
