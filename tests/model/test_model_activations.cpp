// The vectorised FFN activations of each ISA the CPU has (kernels/x86/activations.h, through the
// kernel table) against the definitions in double precision: silu(v) u and gelu(v) u (GELU's
// tanh approximation; v itself from 10 up, 0 from -10 down) over a dense sweep of [-100, 100],
// and gpt-oss's clamped SwiGLU, the clamps' edges and tails, within 4e-6 relative (a few ulp) plus
// the exp argument's own rounding. kernels/ops.h's silu_mul and gelu_mul give the active ISA's
// results (at SPECULA_SIMD=scalar, the libm loops').
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu.h"
#include "kernels/ops.h"
#include "kernels/table.h"

namespace {

using namespace specula;

double silu_ref(double v) {
    return v / (1.0 + std::exp(-v));
}

// The exp's argument: a float computation of it is off by ~|arg| ulp, and exp turns that into
// as much relative error (the conditioning any float implementation has).
double silu_arg(double v) {
    return std::abs(v);
}
double gelu_arg(double v) {
    return std::abs(2.0 * std::sqrt(2.0 / M_PI) * v * (1.0 + 0.044715 * v * v));
}

double gelu_ref(double v) {
    if (v <= -10.0) return 0.0;
    if (v >= 10.0) return v;
    const double y = std::sqrt(2.0 / M_PI) * v * (1.0 + 0.044715 * v * v);
    return v / (1.0 + std::exp(-2.0 * y));  // = 0.5 v (1 + tanh y), without its cancellation
}

std::vector<float> inputs() {
    std::vector<float> v;
    for (int i = -200000; i <= 200000; ++i) v.push_back(float(i) * 5e-4f);  // [-100, 100]
    for (float x :
         {-88.5f,  -88.0f, -87.5f, -87.0f, -86.9f, -20.0f, -10.0f, -9.9999f, -1e-6f, 0.0f,  1e-6f,
          9.9999f, 10.0f,  86.9f,  87.0f,  88.0f,  88.5f,  1e3f,   -1e3f,    3e38f,  -3e38f})
        v.push_back(x);
    return v;
}

// |got - want| <= 4e-6 |want| + floor; the libm loops (kernels/ops.cpp at the scalar level) lose
// tails to 1 + tanh(y)'s cancellation, so they are held to an absolute floor of 1e-7 |v u|.
void expect_close(const char* what, const std::vector<float>& x, const std::vector<float>& u,
                  const std::vector<float>& got, double (*ref)(double), double (*arg)(double),
                  bool libm_floor = false) {
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double want = ref(double(x[i])) * double(u[i]);
        const double err = std::abs(double(got[i]) - want);
        const double tol = (4e-6 + 1.2e-7 * arg(double(x[i]))) * std::abs(want) +
                           (libm_floor ? 1e-7 * std::abs(double(x[i]) * u[i]) : 0.0) + 1e-35;
        if (err > tol)
            ADD_FAILURE() << what << "(" << x[i] << ") * " << u[i] << " = " << got[i] << ", want "
                          << want;
        if (std::abs(want) > 1e-30) worst = std::max(worst, err / std::abs(want));
        if (::testing::Test::HasFailure()) return;
    }
    std::printf("%s: worst relative error %.2e\n", what, worst);
}

void check(const ActivationEntry& e, const char* isa) {
    ASSERT_NE(e.silu_mul, nullptr) << isa;
    ASSERT_NE(e.gelu_mul, nullptr) << isa;
    const std::vector<float> x = inputs();
    std::vector<float> u(x.size());
    for (size_t i = 0; i < u.size(); ++i)
        u[i] = std::abs(x[i]) > 1e37f ? 1.0f : 0.5f + float(i % 7) * 0.25f;
    std::vector<float> g = x;
    e.silu_mul(g.data(), u.data(), int64_t(g.size()));
    expect_close((std::string(isa) + " silu").c_str(), x, u, g, silu_ref, silu_arg);
    g = x;
    e.gelu_mul(g.data(), u.data(), int64_t(g.size()));
    expect_close((std::string(isa) + " gelu").c_str(), x, u, g, gelu_ref, gelu_arg);
    // gpt-oss's clamped SwiGLU: x = min(g, 7), y = clamp(u, -7, 7), x sigmoid(1.702 x) (y + 1).
    ASSERT_NE(e.swiglu_oai, nullptr) << isa;
    std::vector<float> uu(x.size());
    for (size_t i = 0; i < uu.size(); ++i) uu[i] = float(int(i % 41) - 20) * 0.5f;  // -10 .. 10
    g = x;
    e.swiglu_oai(g.data(), uu.data(), int64_t(g.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        const double xc = std::min(double(x[i]), 7.0), yc = std::clamp(double(uu[i]), -7.0, 7.0);
        const double want = xc / (1.0 + std::exp(-1.702 * xc)) * (yc + 1.0);
        const double tol = (4e-6 + 1.2e-7 * 1.702 * std::abs(xc)) * std::abs(want) + 1e-35;
        ASSERT_LE(std::abs(double(g[i]) - want), tol)
            << isa << " swiglu_oai(" << x[i] << ", " << uu[i] << ") = " << g[i];
    }
    // Odd lengths: the vector loop's tail.
    for (int n : {1, 3, 7, 15, 17, 31, 33}) {
        std::vector<float> a(x.begin() + 1000, x.begin() + 1000 + n), b = a;
        e.gelu_mul(a.data(), u.data(), n);
        for (int i = 0; i < n; ++i) b[size_t(i)] = float(gelu_ref(b[size_t(i)]) * u[size_t(i)]);
        for (int i = 0; i < n; ++i)
            EXPECT_NEAR(a[size_t(i)], b[size_t(i)], 1e-6) << isa << " n=" << n;
    }
}

TEST(KernelActivations, EachIsaAgainstTheDefinitions) {
    const KernelTable& t = kernel_table();
    const CpuFeatures& f = cpu_features();
    ASSERT_TRUE(f.avx2) << "this test expects an x86-64 CPU with AVX2";
    check(t.activation(Isa::AVX2), "avx2");
    if (f.avx512) check(t.activation(Isa::AVX512), "avx512");
    EXPECT_EQ(t.activation(Isa::Scalar).silu_mul, nullptr);  // the libm loops are the reference
}

TEST(KernelActivations, OpsUseTheActiveIsa) {
    const std::vector<float> x = inputs();
    const std::vector<float> u(x.size(), 1.0f);
    std::vector<float> g = x;
    silu_mul(g.data(), u.data(), int64_t(g.size()));
    const bool libm = best_activation().silu_mul == nullptr;  // SPECULA_SIMD=scalar
    expect_close("ops silu", x, u, g, silu_ref, silu_arg, libm);
    g = x;
    gelu_mul(g.data(), u.data(), int64_t(g.size()));
    expect_close("ops gelu", x, u, g, gelu_ref, gelu_arg, libm);
}

}  // namespace
