// Locally typical sampling (--typical, typical_p) and top-n-sigma (--top-nsigma, top_n_sigma) in
// the Sampler's chain: hand-computed rows (typical can drop the most likely token; the sigma is the
// whole row's, banned tokens left out, and fewer than 4 tokens turn it off), then a
// straightforward reference of the whole chain (top-n-sigma, top-k, typical, top-p, min-p,
// temperature) against distribution() on random rows with random settings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "common/error.h"
#include "sampling/sampler.h"

using namespace specula;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Every filter off but the two under test.
SamplingParams only(float typical_p, float top_n_sigma) {
    SamplingParams p;
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 1;
    p.typical_p = typical_p;
    p.top_n_sigma = top_n_sigma;
    return p;
}

std::vector<TokenProb> dist(const SamplingParams& p, const std::vector<float>& logits) {
    std::vector<TokenProb> out;
    Sampler(p).distribution(logits.data(), int(logits.size()), out);
    return out;
}

std::vector<int> ids(const std::vector<TokenProb>& d) {
    std::vector<int> v;
    for (const TokenProb& t : d) v.push_back(t.id);
    std::sort(v.begin(), v.end());
    return v;
}

float prob(const std::vector<TokenProb>& d, int id) {
    for (const TokenProb& t : d)
        if (t.id == id) return t.p;
    return 0.0f;
}

// Probabilities 0.4 0.3 0.2 0.1: entropy 1.2799 nats; |-log p - H| = 0.364, 0.076, 0.329, 1.023,
// so the typical order is tokens 1, 2, 0, 3.
std::vector<float> four() {
    return {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
}

TEST(SamplingTypical, KeepsTheTokensNearestTheEntropyUntilTheirMassExceedsP) {
    const auto d45 = dist(only(0.45f, -1), four());  // 0.3 + 0.2 > 0.45: tokens 1 and 2
    EXPECT_EQ(ids(d45), (std::vector<int>{1, 2}));
    EXPECT_NEAR(prob(d45, 1), 0.6f, 1e-6);
    EXPECT_NEAR(prob(d45, 2), 0.4f, 1e-6);
    EXPECT_EQ(ids(dist(only(0.25f, -1), four())), (std::vector<int>{1}));  // 0.3 > 0.25
    EXPECT_EQ(ids(dist(only(0.0f, -1), four())), (std::vector<int>{1}));   // at least one
    EXPECT_EQ(ids(dist(only(0.6f, -1), four())), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(ids(dist(only(0.95f, -1), four())).size(), 4u);
    EXPECT_EQ(ids(dist(only(1.0f, -1), four())).size(), 4u);  // off
    // After top-k: the entropy is the survivors' (top-2: 0.4 and 0.3 renormalised to 4/7, 3/7;
    // H = 0.683; |-log p - H| = 0.123 and 0.164: token 0 first).
    SamplingParams k2 = only(0.5f, -1);
    k2.top_k = 2;
    EXPECT_EQ(ids(dist(k2, four())), (std::vector<int>{0}));
    // Greedy ignores it.
    SamplingParams g = only(0.25f, -1);
    g.temp = 0.0f;
    EXPECT_EQ(ids(dist(g, four())), (std::vector<int>{0}));
}

TEST(SamplingTopNSigma, KeepsLogitsWithinNDeviationsOfTheWholeRowsBest) {
    // mean 3.2, sigma = sqrt(12.56) = 3.544: n = 1 keeps logits >= 6.456, n = 2 >= 2.912.
    const std::vector<float> row = {0, 1, 2, 3, 10};
    EXPECT_EQ(ids(dist(only(1, 1.0f), row)), (std::vector<int>{4}));
    EXPECT_EQ(ids(dist(only(1, 2.0f), row)), (std::vector<int>{3, 4}));
    EXPECT_EQ(ids(dist(only(1, 3.0f), row)).size(), 5u);
    EXPECT_EQ(ids(dist(only(1, -1.0f), row)).size(), 5u);  // off
    EXPECT_EQ(ids(dist(only(1, 0.0f), row)).size(), 5u);   // off
    // Banned tokens do not count towards the statistics.
    const std::vector<float> banned = {0, -kInf, 1, 2, -kInf, 3, 10};
    EXPECT_EQ(ids(dist(only(1, 2.0f), banned)), (std::vector<int>{5, 6}));
    // The deviation is the whole row's, not the top-k survivors': with top-3 (logits 2, 3, 10,
    // too few for a deviation of their own) the floor 2.912 still drops logit 2.
    SamplingParams k3 = only(1, 2.0f);
    k3.top_k = 3;
    EXPECT_EQ(ids(dist(k3, row)), (std::vector<int>{3, 4}));
    // Fewer than 4 tokens, or all equal: off.
    EXPECT_EQ(ids(dist(only(1, 0.5f), {0, 1, 10})).size(), 3u);
    EXPECT_EQ(ids(dist(only(1, 0.5f), {2, 2, 2, 2, 2})).size(), 5u);
    // Bad values are refused.
    EXPECT_THROW(Sampler(only(1, std::numeric_limits<float>::quiet_NaN())), Error);
    EXPECT_THROW(Sampler(only(std::numeric_limits<float>::quiet_NaN(), -1)), Error);
}

// The chain written out plainly: a sort per step, double precision throughout.
std::vector<TokenProb> reference(const SamplingParams& p, const std::vector<float>& l) {
    struct C {
        int id;
        double logit;
    };
    std::vector<C> c;
    double max = -kInf;
    for (int i = 0; i < int(l.size()); ++i) max = std::max(max, double(l[i]));
    if (p.top_n_sigma > 0) {
        double mean = 0, var = 0;
        for (float x : l) mean += x;
        mean /= double(l.size());
        for (float x : l) var += (x - mean) * (x - mean);
        var /= double(l.size());
        const double floor = max - p.top_n_sigma * std::sqrt(var);
        for (int i = 0; i < int(l.size()); ++i)
            if (l[i] >= floor) c.push_back({i, l[i]});
    } else {
        for (int i = 0; i < int(l.size()); ++i) c.push_back({i, l[i]});
    }
    auto by_logit = [](const C& a, const C& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    std::sort(c.begin(), c.end(), by_logit);
    if (p.top_k > 0 && size_t(p.top_k) < c.size()) c.resize(size_t(p.top_k));
    auto softmax = [](const std::vector<C>& v) {
        double m = v[0].logit, z = 0;
        for (const C& x : v) m = std::max(m, x.logit);
        std::vector<double> q;
        for (const C& x : v) z += std::exp(x.logit - m);
        for (const C& x : v) q.push_back(std::exp(x.logit - m) / z);
        return q;
    };
    if (p.typical_p < 1) {
        const std::vector<double> q = softmax(c);
        double h = 0;
        for (double x : q) h -= x * std::log(x);
        std::vector<size_t> order(c.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
            return std::abs(-std::log(q[a]) - h) < std::abs(-std::log(q[b]) - h);
        });
        std::vector<C> kept;
        double cum = 0;
        for (size_t i : order) {
            kept.push_back(c[i]);
            cum += q[i];
            if (cum > p.typical_p) break;
        }
        c = kept;
        std::sort(c.begin(), c.end(), by_logit);
    }
    if (p.top_p < 1) {
        const std::vector<double> q = softmax(c);
        double cum = 0;
        size_t k = 0;
        while (k < c.size()) {
            cum += q[k++];
            if (cum >= p.top_p) break;
        }
        c.resize(k);
    }
    if (p.min_p > 0) {
        const double floor = c[0].logit + std::log(p.min_p);
        c.erase(std::remove_if(c.begin(), c.end(), [&](const C& x) { return x.logit < floor; }),
                c.end());
    }
    for (C& x : c) x.logit /= p.temp;
    const std::vector<double> q = softmax(c);
    std::vector<TokenProb> out;
    for (size_t i = 0; i < c.size(); ++i) out.push_back({c[i].id, float(q[i])});
    return out;
}

TEST(SamplingTypical, ChainMatchesAStraightforwardReference) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    const float typicals[] = {1.0f, 0.95f, 0.7f, 0.3f};
    const float sigmas[] = {-1.0f, 1.0f, 2.0f, 3.5f};
    const int top_ks[] = {0, 40, 300};
    int checked = 0, typical_dropped_best = 0;
    for (int trial = 0; trial < 160; ++trial) {
        std::vector<float> row(2000);
        for (float& x : row) x = normal(rng);
        SamplingParams p = only(typicals[trial % 4], sigmas[(trial / 4) % 4]);
        p.top_k = top_ks[(trial / 16) % 3];
        p.top_p = trial % 3 == 0 ? 1.0f : 0.9f;
        p.min_p = trial % 5 == 0 ? 0.0f : 0.02f;
        p.temp = trial % 2 ? 0.7f : 1.0f;
        const auto got = dist(p, row);
        const auto want = reference(p, row);
        ASSERT_EQ(ids(got), ids(want)) << "trial " << trial;
        for (const TokenProb& t : want) EXPECT_NEAR(prob(got, t.id), t.p, 1e-5) << trial;
        const int best = int(std::max_element(row.begin(), row.end()) - row.begin());
        typical_dropped_best += prob(got, best) == 0.0f;
        ++checked;
    }
    EXPECT_EQ(checked, 160);
    EXPECT_GT(typical_dropped_best, 0) << "no setting dropped the most likely token";
}

}  // namespace
