// Attention deep in the cache on the Vulkan device (shared by test_vulkan and test_vulkan_arch):
// a prompt of `depth` positions, then passes of 1, 5 and 9 tokens. The device's logits of those
// passes match the CPU backend's (F32 caches on both) within `tol`, and are bit-identical to a
// second device session that evaluated the prompt in passes of 97 tokens and the tail one token
// at a time (batch invariance across the segments of vulkan/layers.cpp's split attention, 256
// positions each: choose depth so that the passes straddle a segment boundary).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "model/session.h"

namespace specula::test {

inline std::vector<std::vector<float>> eval_in_passes(Session& s, const std::vector<token_id>& ids,
                                                      size_t pass, int n_vocab) {
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < ids.size(); i += pass) {
        const size_t n = std::min(pass, ids.size() - i);
        s.eval(std::span<const token_id>(ids.data() + i, n));
        for (size_t j = 0; j < n; ++j) {
            const float* l = s.logits(static_cast<int>(j));
            out.emplace_back(l, l + n_vocab);
        }
    }
    return out;
}

// Returns the largest |device - CPU| over the tail's logits.
inline double check_attention_at_depth(const Model& m, int depth, int n_ctx, double tol,
                                       const std::string& name) {
    const int nv = m.hparams().n_vocab;
    std::vector<token_id> prompt(depth), tail(15);
    for (int i = 0; i < depth; ++i) prompt[i] = 1 + (i * 37 + 11) % (nv - 1);
    for (int i = 0; i < 15; ++i) tail[i] = 1 + (i * 53 + 5) % (nv - 1);
    auto params = [&](int ngl) {
        SessionParams sp;
        sp.n_ctx = n_ctx;
        sp.n_threads = 1;
        sp.n_gpu_layers = ngl;
        return sp;
    };
    Session dev(m, params(99)), cpu(m, params(0)), alone(m, params(99));
    EXPECT_EQ(dev.n_gpu_layers(), m.hparams().n_layer) << name;
    EXPECT_EQ(cpu.n_gpu_layers(), 0) << name;
    // The tail in passes of 1, 5 and 9 tokens on the device and on the CPU.
    std::vector<std::vector<float>> got, want;
    dev.eval(prompt, false);
    cpu.eval(prompt, false);
    size_t at = 0;
    for (size_t n : {1, 5, 9}) {
        const std::vector<token_id> pass(tail.begin() + at, tail.begin() + at + n);
        for (auto& l : eval_in_passes(dev, pass, n, nv)) got.push_back(std::move(l));
        for (auto& l : eval_in_passes(cpu, pass, n, nv)) want.push_back(std::move(l));
        at += n;
    }
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        double d = 0;
        for (int j = 0; j < nv; ++j) d = std::max(d, std::fabs(double(got[i][j]) - want[i][j]));
        EXPECT_LE(d, tol) << name << ": position " << depth + i << " differs from the CPU's";
        worst = std::max(worst, d);
    }
    // The same positions on the device after the prompt in other passes, one token at a time.
    eval_in_passes(alone, prompt, 97, nv);
    const auto one = eval_in_passes(alone, tail, 1, nv);
    EXPECT_EQ(one.size(), got.size());
    for (size_t i = 0; i < one.size() && i < got.size(); ++i) {
        EXPECT_EQ(0, std::memcmp(one[i].data(), got[i].data(), sizeof(float) * nv))
            << name << ": position " << depth + i << " depends on the pass";
    }
    return worst;
}

}  // namespace specula::test
