// Helpers for the packed-weight tests (test_repack, test_repack_k, test_repack_float): a random
// weight matrix with its packed copy, a bitwise comparison of results, one matmul over a pool of a
// given size (and at every SIMD level), the checks every packed layout must pass (rows read back,
// row ranges, mixed jobs), and the check that a packed model's logits are batch invariant and
// close to the unpacked model's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "common/threadpool.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quants.h"
#include "kernels/repack.h"
#include "model/session.h"

namespace specula::test {

// A random rows x cols matrix of type t in the row layout and packed (repack()).
struct Packed {
    std::vector<uint8_t> w;
    std::unique_ptr<PackedBuffer> buf;
    WeightView W;  // packed
    WeightView rowwise;
};

inline Packed make_packed(GGMLType t, int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    Packed p{random_weights(rng, t, rows, cols), nullptr, {}, {}};
    p.rowwise = WeightView{t, rows, cols, p.w.data()};
    p.buf = std::make_unique<PackedBuffer>(packed_size(p.rowwise));
    repack(p.rowwise, p.buf->data());
    p.W = p.rowwise;
    p.W.packed = p.buf->data();
    return p;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// y = W x for ntok tokens on a pool of `threads` (unset outputs stay NaN).
inline std::vector<float> run(const WeightView& W, const std::vector<float>& x, int ntok,
                              int threads) {
    ThreadPool pool(threads);
    MatmulScratch scratch;
    std::vector<float> y(static_cast<size_t>(ntok) * W.rows, NAN);
    matmul(W, x.data(), W.cols, ntok, y.data(), W.rows, pool, scratch);
    return y;
}

// Every row of the packed copy reads back (dequantize_packed_row) as the row layout's bits.
inline void expect_rows_read_back(const Packed& p) {
    const int64_t cols = p.rowwise.cols;
    std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols));
    for (int64_t r = 0; r < p.rowwise.rows; ++r) {
        dequantize_row(p.rowwise.type, p.rowwise.row(r), a.data(), cols);
        dequantize_packed_row(p.W, r, b.data());
        ASSERT_TRUE(same_bits(a, b)) << "row " << r;
    }
}

// y = W x for ntok tokens at each SIMD level this CPU runs (runnable_levels() order).
inline std::vector<std::vector<float>> run_at_every_level(const WeightView& W,
                                                          const std::vector<float>& x, int ntok) {
    std::vector<std::vector<float>> out;
    for (SimdLevel l : runnable_levels()) {
        SimdCap cap(l);
        out.push_back(run(W, x, ntok, 2));
    }
    return out;
}

// A packed 45 x 128 matrix of type t: matmul_rows over sub-ranges of rows gives the full
// matmul's values, and a packed and a row-layout weight in one matmul_multi each give what they
// give alone.
inline void expect_row_ranges_and_mixed_jobs(GGMLType t) {
    Packed p = make_packed(t, 45, 128, 21);
    std::mt19937 rng(8);
    constexpr int ntok = 6;
    const std::vector<float> x = random_floats(rng, ntok * 128);
    const std::vector<float> full = run(p.W, x, ntok, 2);
    MatmulScratch scratch;
    const size_t stride = quantize_acts(t, x.data(), 128, 128, ntok, scratch);
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 45}, {3, 19}, {16, 32}, {40, 45}}) {
        std::vector<float> part(ntok * (r1 - r0), NAN);
        matmul_rows(p.W, scratch.acts.data(), stride, ntok, r0, r1, part.data(), r1 - r0);
        for (int tk = 0; tk < ntok; ++tk) {
            for (int64_t r = r0; r < r1; ++r) {
                ASSERT_EQ(part[tk * (r1 - r0) + (r - r0)], full[tk * 45 + r]) << r0 << " " << r;
            }
        }
    }
    ThreadPool pool(2);
    std::vector<float> y1(ntok * 45), y2(ntok * 45);
    const MatmulJob jobs[] = {{p.W, y1.data(), 45}, {p.rowwise, y2.data(), 45}};
    matmul_multi(jobs, x.data(), 128, ntok, pool, scratch);
    EXPECT_TRUE(same_bits(y1, full));
    EXPECT_TRUE(same_bits(y2, run(p.rowwise, x, ntok, 2)));
}

// A 9-token prompt through `packed` (weights packed at load) and `plain` (repack = false): each
// position's logits equal those of a one-token pass bit for bit, and stay within 1e-3 (relative)
// of the unpacked model's.
// tol: the largest logit difference allowed, relative to 1 + the largest |logit| (default), or
// absolute where abs_tol > 0.
inline void expect_packed_model_matches(const Model& packed, const Model& plain,
                                        double abs_tol = 0) {
    const std::vector<token_id> toks = {1, 5, 9, 17, 33, 65, 129, 200, 7};
    SessionParams sp;
    sp.n_ctx = 64;
    sp.n_threads = 2;
    Session a(packed, sp), b(plain, sp), one(packed, sp);
    a.eval(toks);
    b.eval(toks);
    const int nv = packed.hparams().n_vocab;
    for (size_t i = 0; i < toks.size(); ++i) {
        one.eval({&toks[i], 1});
        ASSERT_EQ(0, std::memcmp(one.logits(0), a.logits(static_cast<int>(i)), nv * sizeof(float)))
            << "position " << i << " not batch invariant";
        double diff = 0, mag = 0;
        for (int v = 0; v < nv; ++v) {
            diff = std::max(diff, std::fabs(double(a.logits(i)[v]) - b.logits(i)[v]));
            mag = std::max(mag, std::fabs(double(b.logits(i)[v])));
        }
        EXPECT_LT(diff, abs_tol > 0 ? abs_tol : 1e-3 * (1 + mag)) << "position " << i;
    }
}

}  // namespace specula::test
