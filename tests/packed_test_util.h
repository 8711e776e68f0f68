// Helpers for the packed-weight tests (test_repack, test_repack_k): a random weight matrix with its
// packed copy, a bitwise comparison of results, one matmul over a pool of a given size, and the
// check that a packed model's logits are batch invariant and close to the unpacked model's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"
#include "kernels/threadpool.h"
#include "model/model.h"

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

// A 9-token prompt through `packed` (weights packed at load) and `plain` (SPECULA_REPACK=0): each
// position's logits equal those of a one-token pass bit for bit, and stay within 1e-3 (relative)
// of the unpacked model's.
inline void expect_packed_model_matches(const Model& packed, const Model& plain) {
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
        EXPECT_LT(diff, 1e-3 * (1 + mag)) << "position " << i;
    }
}

}  // namespace specula::test
