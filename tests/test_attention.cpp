// attention(): equals a double-precision reference, and each (position, head) output has exactly
// the same bits whether the position is computed alone, in a verify-sized pass or in one pass over
// 300 positions, with any thread count (batch invariance), for head sizes that take the blocked
// AVX-512 path (multiples of 16) and ones that do not, with 1, 2, 4 and 32 query heads per KV head.
// ctest also runs it with SPECULA_SIMD=avx2 and =scalar (the level is chosen once per process).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/threadpool.h"
#include "model/attention.h"
#include "model/kv_cache.h"

using namespace specula;

namespace {

constexpr int kPositions = 300;

struct AttnCase {
    AttentionShape s;
    KVCache kv;
    std::vector<float> q;  // kPositions rows of n_head * head_dim
    AttnCase(int n_head, int n_head_kv, int hd)
        : s{n_head, n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))},
          kv(2, kPositions + 5, n_head_kv * hd) {
        std::mt19937 rng(n_head * 1000 + n_head_kv * 10 + hd);
        std::normal_distribution<float> nd(0.f, 1.f);
        for (int layer = 0; layer < 2; ++layer) {
            std::vector<float> kr(n_head_kv * hd), vr(n_head_kv * hd);
            for (int p = 0; p < kPositions; ++p) {
                for (int i = 0; i < n_head_kv * hd; ++i) {
                    kr[i] = 2.f * nd(rng);
                    vr[i] = nd(rng);
                }
                kv.write(layer, p, kr.data(), vr.data());
            }
        }
        q.resize(static_cast<size_t>(kPositions) * n_head * hd);
        for (auto& x : q) x = nd(rng);
    }
    int64_t ldq() const { return static_cast<int64_t>(s.n_head) * s.head_dim; }

    // Positions [0, kPositions) in passes of `pass` positions.
    std::vector<float> run(int pass, ThreadPool& pool) const {
        std::vector<float> out(q.size(), NAN);
        std::vector<float> scores(attention_scratch_floats(s, kv.n_ctx(), pool.size()));
        for (int p0 = 0; p0 < kPositions; p0 += pass) {
            const int n = std::min(pass, kPositions - p0);
            attention(kv, 1, p0, n, q.data() + p0 * ldq(), out.data() + p0 * ldq(), s, pool,
                      scores.data());
        }
        return out;
    }
};

struct Shape {
    int n_head, n_head_kv, hd;
};

class AttentionInvariance : public ::testing::TestWithParam<Shape> {};

}  // namespace

TEST_P(AttentionInvariance, EqualsReferenceAndIsPassAndThreadInvariant) {
    const Shape sh = GetParam();
    const AttnCase st(sh.n_head, sh.n_head_kv, sh.hd);
    ThreadPool pool1(1), pool2(2), pool3(3);
    const std::vector<float> single = st.run(1, pool1);

    // Reference in double precision.
    const int group = sh.n_head / sh.n_head_kv;
    std::vector<double> sc(kPositions);
    for (int t = 0; t < kPositions; t += 7) {
        for (int h = 0; h < sh.n_head; ++h) {
            const float* qv = st.q.data() + t * st.ldq() + h * sh.hd;
            const int off = (h / group) * sh.hd;
            double mx = -1e300, sum = 0;
            for (int j = 0; j <= t; ++j) {
                double d = 0;
                for (int i = 0; i < sh.hd; ++i) d += double(qv[i]) * st.kv.k(1, j)[off + i];
                sc[j] = d * st.s.scale;
                mx = std::max(mx, sc[j]);
            }
            for (int j = 0; j <= t; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
            for (int i = 0; i < sh.hd; ++i) {
                double o = 0;
                for (int j = 0; j <= t; ++j) o += sc[j] / sum * st.kv.v(1, j)[off + i];
                ASSERT_NEAR(single[t * st.ldq() + h * sh.hd + i], o, 1e-4)
                    << "position " << t << " head " << h << " element " << i;
            }
        }
    }

    for (int pass : {2, 5, 9, 16, 17, 64, kPositions}) {
        for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
            const std::vector<float> got = st.run(pass, *pool);
            for (size_t i = 0; i < got.size(); ++i) {
                ASSERT_EQ(std::memcmp(&got[i], &single[i], sizeof(float)), 0)
                    << "pass " << pass << " threads " << pool->size() << ": position "
                    << i / st.ldq() << " element " << i % st.ldq() << ": " << got[i]
                    << " != " << single[i];
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionInvariance,
                         ::testing::Values(Shape{32, 16, 64},  // the ~1B benchmark target
                                           Shape{8, 4, 8},     // stories260K: not blocked
                                           Shape{4, 4, 48}, Shape{8, 2, 128},
                                           Shape{32, 1, 16},  // 32 query heads per KV head
                                           Shape{6, 3, 40}),  // 40: not a multiple of 16
                         [](const auto& info) {
                             const Shape& s = info.param;
                             return "h" + std::to_string(s.n_head) + "_kv" +
                                    std::to_string(s.n_head_kv) + "_d" + std::to_string(s.hd);
                         });
