// attention(): equals a double-precision reference, and each (position, head) output has exactly
// the same bits whether the position is computed alone, in a verify-sized pass or in one pass over
// 300 positions, with any thread count (batch invariance), for head sizes that take the blocked
// AVX-512 path (multiples of 16) and ones that do not, with 1, 2, 4 and 32 query heads per KV head.
// ctest also runs it with SPECULA_SIMD=avx2 and =scalar (the level is chosen once per process).
// The same for F16 and Q8_0 caches (the reference then uses the rounded values the cache holds,
// and for Q8_0 keys the query rounded to Q8_0 as llama.cpp rounds it for their dot products),
// and with sliding windows (a position sees itself and the window - 1 before it) narrower and
// wider than a block of positions, and with attention sinks (gpt-oss: one logit per head in the
// softmax's denominator).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/threadpool.h"
#include "kernels/attention.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/policy.h"
#include "kernels/table.h"
#include "model/blocks/attention.h"
#include "model/state/kv_cache.h"
#include "test_util.h"

using namespace specula;

namespace {

constexpr int kPositions = 300;

struct AttnCase {
    AttentionShape s;
    KVCache kv;
    std::vector<float> q;     // kPositions rows of n_head * head_dim
    std::vector<float> sink;  // n_head logits, or empty
    AttnCase(int n_head, int n_head_kv, int hd, KVType type, int window, bool sinks = false)
        : s{n_head, n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd)), window},
          kv(2, kPositions + 5, n_head_kv * hd, type, type, {}, 0, hd) {
        std::mt19937 rng(n_head * 1000 + n_head_kv * 10 + hd);
        std::normal_distribution<float> nd(0.f, 1.f);
        if (sinks) {
            // Around the scores' scale, one far above them (a head that mostly attends nowhere).
            for (int h = 0; h < n_head; ++h) sink.push_back(h == 1 ? 8.f : 2.f * nd(rng));
            s.sinks = sink.data();
        }
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
    KVType type = KVType::F32;
    int window = 0;
    bool sinks = false;
};

class AttentionInvariance : public ::testing::TestWithParam<Shape> {};

// q rounded to Q8_0 by the kernel table's quantizer, block by block, as the attention rounds a
// query for a Q8_0 key cache (as llama.cpp rounds Q to its keys' dot type). Its rule is
// llama.cpp's (d = max |x| / 127 kept as F16, each x * (1 / d) rounded), but the vector levels'
// x * (127 / max) can differ from x * (1 / d) by an ulp, which moves a value that falls within
// an ulp of a half to the other integer: the reference takes the same rounding, not a copy of it.
std::vector<float> rounded_q8(const float* q, int n) {
    static const QuantizeRowFn quantize = best_quantize_row(GGMLType::Q8_0);
    std::vector<float> out(static_cast<size_t>(n));
    for (int b = 0; b < n / 32; ++b) {
        block_q8_0 blk;
        quantize(q + b * 32, &blk, 32);
        for (int i = 0; i < 32; ++i) out[b * 32 + i] = fp16_to_fp32(blk.d) * blk.qs[i];
    }
    return out;
}

// Layer 1's K or V rows as the cache holds them, as floats (row j at j * n_embd_kv).
std::vector<float> rows_held(const KVCache& kv, bool k) {
    const int n = kv.n_embd_kv(0);
    std::vector<float> out(size_t(kPositions) * n);
    for (int j = 0; j < kPositions; ++j)
        k ? kv.read_k(1, j, 0, n, out.data() + size_t(j) * n)
          : kv.read_v(1, j, 0, n, out.data() + size_t(j) * n);
    return out;
}

}  // namespace

TEST_P(AttentionInvariance, EqualsReferenceAndIsPassAndThreadInvariant) {
    const Shape sh = GetParam();
    const AttnCase st(sh.n_head, sh.n_head_kv, sh.hd, sh.type, sh.window, sh.sinks);
    ThreadPool pool1(1), pool2(2), pool3(3);
    const std::vector<float> single = st.run(1, pool1);

    // Reference in double precision, over the values as the cache rounded them.
    const int group = sh.n_head / sh.n_head_kv;
    std::vector<double> sc(kPositions);
    const std::vector<float> kh = rows_held(st.kv, true), vh = rows_held(st.kv, false);
    const size_t nkv = size_t(st.kv.n_embd_kv(0));
    for (int t = 0; t < kPositions; t += 7) {
        for (int h = 0; h < sh.n_head; ++h) {
            const float* qv = st.q.data() + t * st.ldq() + h * sh.hd;
            std::vector<float> qr;
            if (sh.type == KVType::Q8_0 && sh.hd % 32 == 0) {
                qr = rounded_q8(qv, sh.hd);
                qv = qr.data();
            }
            const int off = (h / group) * sh.hd;
            double mx = -1e300, sum = 0;
            const int j0 = sh.window > 0 ? std::max(0, t - sh.window + 1) : 0;
            for (int j = j0; j <= t; ++j) {
                double d = 0;
                for (int i = 0; i < sh.hd; ++i) d += double(qv[i]) * kh[j * nkv + off + i];
                sc[j] = d * st.s.scale;
                mx = std::max(mx, sc[j]);
            }
            if (sh.sinks) mx = std::max(mx, double(st.sink[h]));
            for (int j = j0; j <= t; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
            if (sh.sinks) sum += std::exp(double(st.sink[h]) - mx);
            for (int i = 0; i < sh.hd; ++i) {
                double o = 0;
                for (int j = j0; j <= t; ++j) o += sc[j] / sum * vh[j * nkv + off + i];
                ASSERT_NEAR(single[t * st.ldq() + h * sh.hd + i], o, 1e-4)
                    << "position " << t << " head " << h << " element " << i;
            }
        }
    }

    // Under the sanitizers: two passes inside one block, one across blocks and the whole prompt, on
    // one and three threads (the Release pass runs every size on 1, 2 and 3).
    const std::vector<int> passes = test::kSanitizedBuild
                                        ? std::vector<int>{2, 9, 17, kPositions}
                                        : std::vector<int>{2, 5, 9, 16, 17, 64, kPositions};
    const std::vector<ThreadPool*> pools = test::kSanitizedBuild
                                               ? std::vector<ThreadPool*>{&pool1, &pool3}
                                               : std::vector<ThreadPool*>{&pool1, &pool2, &pool3};
    for (int pass : passes) {
        for (ThreadPool* pool : pools) {
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

// Every shape with each cache type (Q8_0 needs K/V rows of a multiple of 32 values).
std::vector<Shape> shapes_and_types() {
    const Shape shapes[] = {{32, 16, 64},  // the ~1B benchmark target
                            {8, 4, 8},     // stories260K: AVX2's 8-lane kernels, at AVX-512 too
                            {4, 4, 48},   {8, 2, 128}, {32, 1, 16},  // 32 query heads per KV head
                            {6, 3, 40},    // 40: not a multiple of 16 (AVX2's kernels again)
                            {4, 2, 12},    // 12: no blocked kernel at any level
                            {4, 2, 96},    // Phi-3: whole Q8_0 blocks, not an even number of them
                            {4, 1, 256},   // Gemma 3 and Qwen3.5's full-attention layers
                            {3, 1, 576}};  // MLA's latent rows: the run-time kernels for wide heads
    std::vector<Shape> out;
    for (KVType t : {KVType::F32, KVType::F16, KVType::Q8_0})
        for (Shape s : shapes)
            if (t != KVType::Q8_0 || s.n_head_kv * s.hd % 32 == 0)
                out.push_back({s.n_head, s.n_head_kv, s.hd, t});
    // A wide head whose pieces leave a rest in every slice size (33 of 16 lanes, 66 of 8).
    out.push_back({2, 1, 528, KVType::F32});
    // Sliding windows: of one row, shorter than a block's positions, and longer (blocked and
    // not blocked head sizes, grouped and not).
    for (KVType t : {KVType::F32, KVType::F16, KVType::Q8_0})
        for (int w : {1, 13, 40})
            for (Shape s : {Shape{8, 2, 128}, Shape{6, 3, 40}, Shape{4, 1, 256}, Shape{4, 2, 12}})
                if ((t == KVType::F32 || w == 13) && (t != KVType::Q8_0 || s.hd % 32 == 0))
                    out.push_back({s.n_head, s.n_head_kv, s.hd, t, w});
    // Attention sinks, with and without a window (blocked and not blocked head sizes; the
    // 128-wide heads only windowed, which keeps the scalar run short).
    for (int w : {0, 13})
        for (Shape s : {Shape{8, 2, 128}, Shape{6, 3, 40}, Shape{4, 2, 64}, Shape{4, 2, 12}})
            if (w > 0 || s.hd < 128)
                out.push_back({s.n_head, s.n_head_kv, s.hd, KVType::F16, w, true});
    return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionInvariance, ::testing::ValuesIn(shapes_and_types()),
                         [](const auto& info) {
                             const Shape& s = info.param;
                             // Appended piece by piece: GCC 12 warns (-Wrestrict, wrongly)
                             // on "h" + std::string.
                             std::string name = "h";
                             name += std::to_string(s.n_head);
                             name += "_kv" + std::to_string(s.n_head_kv);
                             name += "_d" + std::to_string(s.hd);
                             name += std::string("_") + kv_type_name(s.type);
                             if (s.window > 0) name += "_w" + std::to_string(s.window);
                             if (s.sinks) name += "_sinks";
                             return name;
                         });

// Heads of a multiple of 8 values have blocked kernels at every vector level (AVX-512 takes AVX2's
// 8-lane ones for sizes its 16 lanes do not divide: stories260K's heads of 8), others none.
TEST(BlockedKernels, CoverEveryMultipleOfEight) {
    const bool vector =
        active_simd_level() == SimdLevel::AVX512 || active_simd_level() == SimdLevel::AVX2;
    for (int hd : {8, 24, 40, 64, 256, 512, 576, 2048}) {
        BlockAttentionKernels k{};
        EXPECT_EQ(best_blocked_attention(hd, &k), vector) << hd;
        if (vector) EXPECT_TRUE(k.qk && k.pv && k.qk_t && k.qk_th && k.pv_h) << hd;
    }
    BlockAttentionKernels k{};
    EXPECT_FALSE(best_blocked_attention(12, &k));
    EXPECT_FALSE(best_blocked_attention(2056, &k)) << "over the widest head the kernels take";
}

// The integer kernels for Q8_0 keys (BlockAttentionKernels::qk_q8) give their formula's bits:
// per block the exact integer dot, then fma(dot, d_k * d_q, acc) block by block, times the scale;
// over rows with a gap between them, from a row that is not a multiple of 16 (nor of 8), keys
// over the whole int8 range, for 1-5 queries and every head of 32 to 256 values (AVX-512: VNNI, 16
// rows at a time, an odd last block beside zeros; AVX2: byte products, 8 rows at a time). The
// scalar level has none (it widens).
TEST(KeyDotQ8, IntegerKernelGivesItsFormulasBits) {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> qi(-127, 127), ki(-128, 127);
    std::normal_distribution<float> nd(0.f, 1.f);
    const SimdLevel level = active_simd_level();
    for (const int hd : {32, 64, 96, 128, 160, 192, 224, 256}) {
        BlockAttentionKernels bk{};
        const AttentionEntry e = best_attention();
        if (!e.blocked || !e.blocked(hd, &bk) || !bk.qk_q8) {
            EXPECT_FALSE(level == SimdLevel::AVX2 || level == SimdLevel::AVX512)
                << "no integer kernel for " << hd;
            continue;
        }
        const int nb = hd / 32, rows = 45;
        const size_t stride = size_t(nb + 1) * 34;  // a block of another head between rows
        std::vector<uint8_t> k(stride * rows);
        for (int j = 0; j < rows; ++j) {
            for (int b = 0; b <= nb; ++b) {
                uint8_t* blk = k.data() + j * stride + b * 34;
                const fp16_t d = fp32_to_fp16(0.01f + std::fabs(nd(rng)));
                std::memcpy(blk, &d, 2);
                for (int t = 0; t < 32; ++t) blk[2 + t] = static_cast<uint8_t>(ki(rng));
            }
        }
        std::vector<KeyQueryQ8> q(size_t(5) * nb);
        for (auto& b : q) {
            b.d = fp16_to_fp32(fp32_to_fp16(0.01f + std::fabs(nd(rng))));
            b.sum = 0;
            for (auto& x : b.qs) b.sum += (x = static_cast<int8_t>(qi(rng)));
        }
        for (const int nq : {1, 2, 5}) {
            std::vector<float> out(size_t(nq) * rows, -1.f);
            std::vector<const KeyQueryQ8*> qp(nq);
            std::vector<float*> sp(nq);
            for (int i = 0; i < nq; ++i) {
                qp[size_t(i)] = q.data() + i * nb;
                sp[size_t(i)] = out.data() + size_t(i) * rows;
            }
            bk.qk_q8(k.data(), stride, hd, 3, 42, qp.data(), nq, 0.125f, sp.data());
            for (int i = 0; i < nq; ++i) {
                for (int j = 0; j < rows; ++j) {
                    float want = -1.f;  // rows outside [3, 42) untouched
                    if (j >= 3 && j < 42) {
                        float acc = 0.f;
                        for (int b = 0; b < nb; ++b) {
                            const uint8_t* blk = k.data() + j * stride + b * 34;
                            fp16_t dh;
                            std::memcpy(&dh, blk, 2);
                            int32_t dot = 0;
                            for (int t = 0; t < 32; ++t)
                                dot += int32_t(int8_t(blk[2 + t])) * q[size_t(i * nb + b)].qs[t];
                            const float dd = fp16_to_fp32(dh) * q[size_t(i * nb + b)].d;
                            acc = std::fma(static_cast<float>(dot), dd, acc);
                        }
                        want = acc * 0.125f;
                    }
                    const float got = out[size_t(i) * rows + j];
                    ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
                        << "hd " << hd << " nq " << nq << " query " << i << " row " << j << ": "
                        << got << " != " << want;
                }
            }
        }
    }
}

// The transposed key kernels (qk_t over floats, qk_th over F16) give their formula's bits: per
// row, the FMA chains over the even and the odd values of the head from 0, added, times the
// scale, the same at every vector level; over rows [3, 42) of blocks of 16 (partial first and
// last blocks), blocks a head of another size apart, for 1-30 queries (several register groups).
TEST(KeyDotTransposed, KernelsGiveTheirFormulasBits) {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (const int hd : {8, 16, 24, 64, 128, 256, 576}) {
        BlockAttentionKernels bk{};
        if (!best_blocked_attention(hd, &bk)) {
            EXPECT_EQ(active_simd_level(), SimdLevel::Scalar) << "no blocked kernels for " << hd;
            continue;
        }
        const int rows = 48, nb = rows / kKeyBlock;
        const size_t bs = size_t(kKeyBlock) * (hd + 8);  // a block, then 8 lines of another head
        std::vector<float> kf(bs * nb);
        std::vector<uint16_t> kh(kf.size());
        for (size_t i = 0; i < kf.size(); ++i) {
            kh[i] = fp32_to_fp16(nd(rng));
            kf[i] = nd(rng);
        }
        std::vector<float> q(size_t(30) * hd);
        for (auto& x : q) x = nd(rng);
        for (const int nq : {1, 2, 13, 30}) {
            for (const bool half : {false, true}) {
                std::vector<float> out(size_t(nq) * rows, -1.f);
                std::vector<const float*> qp(static_cast<size_t>(nq));
                std::vector<float*> sp(static_cast<size_t>(nq));
                for (int i = 0; i < nq; ++i) {
                    qp[size_t(i)] = q.data() + size_t(i) * hd;
                    sp[size_t(i)] = out.data() + size_t(i) * rows;
                }
                if (half)
                    bk.qk_th(kh.data(), bs, hd, 3, 42, qp.data(), nq, 0.125f, sp.data());
                else
                    bk.qk_t(kf.data(), bs, hd, 3, 42, qp.data(), nq, 0.125f, sp.data());
                for (int i = 0; i < nq; ++i) {
                    for (int j = 0; j < rows; ++j) {
                        float want = -1.f;  // rows outside [3, 42) untouched
                        if (j >= 3 && j < 42) {
                            float e = 0.f, o = 0.f;
                            for (int d = 0; d < hd; ++d) {
                                const size_t at = size_t(j / kKeyBlock) * bs +
                                                  size_t(kKeyBlock) * d + j % kKeyBlock;
                                const float kv = half ? fp16_to_fp32(kh[at]) : kf[at];
                                float& c = d % 2 ? o : e;
                                c = std::fma(q[size_t(i) * hd + d], kv, c);
                            }
                            want = (e + o) * 0.125f;
                        }
                        const float got = out[size_t(i) * rows + j];
                        ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
                            << "hd " << hd << " nq " << nq << (half ? " f16" : " f32") << " query "
                            << i << " row " << j << ": " << got << " != " << want;
                    }
                }
            }
        }
    }
}

// The blocked kernels' softmax gives its formula's bits (kernels/attention.h), so the same at
// AVX-512 and at AVX2: rows of 1 to 8195 scores, with spreads that make some e^x subnormal or zero
// (x - max down to -130, below the clamp at -104) and ties at the maximum.
float softmax_exp(float x) {  // e^x for x <= 0, the kernels' steps one lane at a time
    x = std::max(x, -104.f);
    const float n = std::nearbyint(x * 1.44269504088896341f);
    float r = std::fma(-n, 0.693145751953125f, x);
    r = std::fma(-n, 1.428606765330187045e-06f, r);
    float p = 1.f / 5040.f;
    for (const float c : {1.f / 720.f, 1.f / 120.f, 1.f / 24.f, 1.f / 6.f, 0.5f, 1.f, 1.f})
        p = std::fma(p, r, c);
    return std::ldexp(p, static_cast<int>(n));  // one rounding, subnormal results too
}

TEST(BlockedSoftmax, KernelGivesItsFormulasBits) {
    BlockAttentionKernels bk{};
    if (!best_blocked_attention(64, &bk)) {
        EXPECT_EQ(active_simd_level(), SimdLevel::Scalar) << "no blocked kernels for 64";
        return;
    }
    ASSERT_NE(bk.softmax, nullptr) << "the vector levels have a softmax of their own";
    std::mt19937 rng(5);
    for (const int n : {1, 7, 8, 15, 16, 17, 31, 100, 1000, 8195}) {
        for (const float spread : {1.f, 30.f, 130.f}) {
            std::uniform_real_distribution<float> ud(-spread, 3.f);
            std::vector<float> x(static_cast<size_t>(n));
            for (float& v : x) v = ud(rng);
            if (n > 2) x[size_t(n) / 2] = x[0] = *std::max_element(x.begin(), x.end());
            float m = -INFINITY;
            for (const float v : x) m = std::max(m, v);
            std::vector<float> e(x.size());
            double s0[8] = {}, s1[8] = {};
            for (int i = 0; i < n; ++i) {
                e[size_t(i)] = softmax_exp(x[size_t(i)] - m);
                double* acc = i % 16 < 8 ? s0 : s1;
                acc[i % 8] += e[size_t(i)];
            }
            double l[8];
            for (int k = 0; k < 8; ++k) l[k] = s0[k] + s1[k];
            const double sum = ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
            const float inv = static_cast<float>(1.0 / sum);
            bk.softmax(x.data(), n);
            for (int i = 0; i < n; ++i) {
                const float want = e[size_t(i)] * inv;
                ASSERT_EQ(std::memcmp(&x[size_t(i)], &want, sizeof(float)), 0)
                    << "n " << n << " spread " << spread << " column " << i << ": " << x[size_t(i)]
                    << " != " << want;
            }
        }
    }
}

// A sliding-window layer's ring of rows (position p in row p % rows) gives the bits of a cache of
// the whole context, written pass by pass, for each cache type and passes up to the ring's
// max_pass: runs that wrap go through the kernels in pieces (the Q8_0 ones in place).
TEST(AttentionRing, RingEqualsWholeCache) {
    const AttentionShape s{8, 2, 64, 0.125f, 13};
    const int n_ctx = 120, max_pass = 9, n_embd_kv = 2 * 64;
    const int window[1] = {13};
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> k(size_t(n_ctx) * n_embd_kv), v(k.size()), q(size_t(n_ctx) * 8 * 64);
    for (auto* x : {&k, &v, &q})
        for (auto& e : *x) e = nd(rng);
    ThreadPool pool(2);
    for (KVType t : {KVType::F32, KVType::F16, KVType::Q8_0}) {
        // Whole rows and head-major (kv_cache.h), each as a ring and whole.
        KVCache whole(1, n_ctx, n_embd_kv, t, t);
        KVCache ring(1, n_ctx, n_embd_kv, t, t, window, max_pass);
        KVCache whole_hm(1, n_ctx, n_embd_kv, t, t, {}, 0, 64);
        KVCache ring_hm(1, n_ctx, n_embd_kv, t, t, window, max_pass, 64);
        ASSERT_LT(ring.rows(0), n_ctx);
        ASSERT_EQ(whole_hm.stride(0), 64);
        ASSERT_EQ(whole.stride(0), n_embd_kv);
        std::vector<float> scores(attention_scratch_floats(s, n_ctx, pool.size()));
        std::vector<float> a(q.size()), b[3];
        for (auto& x : b) x.resize(q.size());
        KVCache* others[3] = {&ring, &whole_hm, &ring_hm};
        for (int p0 = 0, i = 0; p0 < n_ctx; ++i) {
            const int n = std::min(n_ctx - p0, i % 2 ? max_pass : 4);
            for (int p = p0; p < p0 + n; ++p) {
                const float* kr = k.data() + size_t(p) * n_embd_kv;
                const float* vr = v.data() + size_t(p) * n_embd_kv;
                whole.write(0, p, kr, vr);
                for (KVCache* c : others) c->write(0, p, kr, vr);
            }
            const size_t at = size_t(p0) * 8 * 64;
            attention(whole, 0, p0, n, q.data() + at, a.data() + at, s, pool, scores.data());
            for (int c = 0; c < 3; ++c)
                attention(*others[c], 0, p0, n, q.data() + at, b[c].data() + at, s, pool,
                          scores.data());
            p0 += n;
        }
        for (int c = 0; c < 3; ++c)
            for (size_t i = 0; i < a.size(); ++i)
                ASSERT_EQ(std::memcmp(&a[i], &b[c][i], sizeof(float)), 0)
                    << kv_type_name(t) << " "
                    << (c == 0   ? "ring"
                        : c == 1 ? "head-major"
                                 : "head-major ring")
                    << ": position " << i / (8 * 64) << " element " << i % (8 * 64);
    }
}

// read_k_rows / read_v_rows give what read_k / read_v give row by row, for slices starting
// inside a block and spanning blocks, on F16 and Q8_0 caches.
TEST(KVCacheTypes, RowRunsEqualRowByRow) {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.f, 2.f);
    KVCache kv(1, 40, 128, KVType::Q8_0, KVType::F16);
    std::vector<float> k(128), v(128);
    for (int j = 0; j < 40; ++j) {
        for (auto& x : k) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        kv.write(0, j, k.data(), v.data());
    }
    for (const auto [off, n] : {std::pair{0, 128}, {64, 64}, {20, 50}, {96, 32}}) {
        std::vector<float> run(size_t(37) * n), one(static_cast<size_t>(n));
        for (const bool is_k : {true, false}) {
            if (is_k)
                kv.read_k_rows(0, 2, 39, off, n, run.data());
            else
                kv.read_v_rows(0, 2, 39, off, n, run.data());
            for (int j = 2; j < 39; ++j) {
                if (is_k)
                    kv.read_k(0, j, off, n, one.data());
                else
                    kv.read_v(0, j, off, n, one.data());
                for (int i = 0; i < n; ++i)
                    ASSERT_EQ(run[size_t(j - 2) * n + i], one[size_t(i)])
                        << (is_k ? "K" : "V") << " row " << j << " off " << off << " i " << i;
            }
        }
    }
}

// A head-major cache (kv_cache.h) holds what a whole-row one holds: the same values for reads of
// any span (within a head or across heads, a single row or a run), byte-identical snapshots, and
// a snapshot of either restores into the other. A Q8_0 side with heads of 48 values (not whole
// blocks) keeps whole rows.
TEST(KVCacheTypes, HeadMajorHoldsWhatWholeRowsHold) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.f, 2.f);
    const int n_ctx = 50, n_embd_kv = 4 * 64;
    for (const auto [tk, tv] : {std::pair{KVType::F32, KVType::F16},
                                {KVType::Q8_0, KVType::F16},
                                {KVType::F16, KVType::Q8_0},
                                {KVType::Q8_0, KVType::Q8_0}}) {
        KVCache rows(2, n_ctx, n_embd_kv, tk, tv), heads(2, n_ctx, n_embd_kv, tk, tv, {}, 0, 64);
        ASSERT_EQ(heads.stride(0), 64);
        ASSERT_EQ(heads.stride(0), 64);
        ASSERT_EQ(heads.k_stride_bytes(0), kv_row_bytes(tk, 64));
        std::vector<float> k(n_embd_kv), v(n_embd_kv);
        std::vector<token_id> toks;
        for (int il = 0; il < 2; ++il) {
            for (int j = 0; j < 45; ++j) {
                for (auto& x : k) x = nd(rng);
                for (auto& x : v) x = nd(rng);
                rows.write(il, j, k.data(), v.data());
                heads.write(il, j, k.data(), v.data());
            }
        }
        for (int j = 0; j < 45; ++j) toks.push_back(j % 7);
        rows.append(toks);
        heads.append(toks);
        auto same_reads = [&](const KVCache& a, const KVCache& b, const char* what) {
            for (const auto [off, n] :
                 {std::pair{0, n_embd_kv}, {64, 64}, {20, 50}, {96, 32}, {60, 100}, {128, 128}}) {
                std::vector<float> ra(size_t(43) * n), rb(ra.size());
                for (const bool is_k : {true, false}) {
                    for (int il = 0; il < 2; ++il) {
                        if (is_k) {
                            a.read_k_rows(il, 2, 45, off, n, ra.data());
                            b.read_k_rows(il, 2, 45, off, n, rb.data());
                        } else {
                            a.read_v_rows(il, 2, 45, off, n, ra.data());
                            b.read_v_rows(il, 2, 45, off, n, rb.data());
                        }
                        ASSERT_EQ(std::memcmp(ra.data(), rb.data(), ra.size() * sizeof(float)), 0)
                            << what << " " << kv_type_name(is_k ? tk : tv) << (is_k ? " K" : " V")
                            << " layer " << il << " off " << off << " n " << n;
                        std::vector<float> one(static_cast<size_t>(n));
                        if (is_k)
                            b.read_k(il, 17, off, n, one.data());
                        else
                            b.read_v(il, 17, off, n, one.data());
                        ASSERT_EQ(std::memcmp(one.data(), rb.data() + size_t(15) * n,
                                              one.size() * sizeof(float)),
                                  0)
                            << what << " row 17 off " << off;
                    }
                }
            }
        };
        same_reads(rows, heads, "written");
        const KVSnapshot sr = rows.save(45), sh = heads.save(45);
        ASSERT_EQ(sr.k, sh.k);
        ASSERT_EQ(sr.v, sh.v);
        KVCache rows2(2, n_ctx, n_embd_kv, tk, tv), heads2(2, n_ctx, n_embd_kv, tk, tv, {}, 0, 64);
        rows2.restore(sh);
        heads2.restore(sr);
        same_reads(rows, heads2, "restored head-major");
        same_reads(rows2, heads, "restored whole rows");
        EXPECT_EQ(heads2.n_past(), 45);
    }
    KVCache q8_48(1, 8, 4 * 48, KVType::Q8_0, KVType::F16, {}, 0, 48);
    EXPECT_EQ(q8_48.stride(0), 4 * 48);
    KVCache f16_48(1, 8, 4 * 48, KVType::F16, KVType::F16, {}, 0, 48);
    EXPECT_EQ(f16_48.stride(0), 48);
}

// Rows are rounded once, at write: F16 to nearest even, Q8_0 per block of 32 (scale = amax/127);
// a Q8_0 cache refuses rows that are not whole blocks; bytes() counts what each type stores.
TEST(KVCacheTypes, RoundsAtWriteAndSizes) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 3.f);
    std::vector<float> k(64), v(64);
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    KVCache f16(1, 4, 64, KVType::F16, KVType::Q8_0);
    f16.write(0, 2, k.data(), v.data());
    std::vector<float> got(64);
    f16.read_k(0, 2, 0, 64, got.data());
    for (int i = 0; i < 64; ++i) {
        EXPECT_EQ(got[i], fp16_to_fp32(fp32_to_fp16(k[i]))) << i;
        EXPECT_NE(got[i], k[i]) << i;  // random floats are not all halves
    }
    f16.read_v(0, 2, 0, 64, got.data());
    for (int b = 0; b < 2; ++b) {
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[b * 32 + i]));
        for (int i = 0; i < 32; ++i)
            EXPECT_NEAR(got[b * 32 + i], v[b * 32 + i], amax / 127 * 0.51f) << b * 32 + i;
    }
    std::vector<float> part(5);  // a slice inside a block
    f16.read_v(0, 2, 30, 5, part.data());
    for (int i = 0; i < 5; ++i) EXPECT_EQ(part[i], got[30 + i]);
    // Rows are allocated in whole key blocks of 16: 10 rows take 16, 32 take 32.
    EXPECT_EQ(KVCache::bytes(2, 10, 64, KVType::F32, KVType::F32), 2 * 16 * 64 * 4 * 2);
    EXPECT_EQ(KVCache::bytes(2, 10, 64, KVType::F16, KVType::Q8_0), 2 * 16 * (128 + 68));
    EXPECT_EQ(KVCache::bytes(2, 32, 64, KVType::F16, KVType::Q8_0), 2 * 32 * (128 + 68));
    try {
        KVCache bad(1, 4, 40, KVType::Q8_0, KVType::F16);
        FAIL() << "a q8_0 cache of 40-value rows was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
    }
    EXPECT_EQ(parse_kv_type("q8_0", "-ctk"), KVType::Q8_0);
    try {
        parse_kv_type("q4_0", "-ctk");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("-ctk must be f32, f16 or q8_0, got 'q4_0'"),
                  std::string::npos)
            << e.what();
    }
}
