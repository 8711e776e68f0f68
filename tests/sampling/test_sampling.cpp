// Sampler tests: the argmax tie rule, each filter on hand-made logits with hand-computed
// expectations (including the llama.cpp chain order), a straightforward reference of the chain on
// a 32k vocabulary, seeded reproducibility, no allocation per call once warmed, and empirical
// frequencies of sample() against distribution() (chi-square).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "common/error.h"
#include "sampling/sampler.h"

// Counts heap allocations so the test can check that sample() does not allocate once warmed.
// (The replacement new uses malloc, so delete must use free.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
static std::atomic<long> g_allocs{0};
void* operator new(std::size_t n) {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}

using namespace specula;

namespace {

SamplingParams params(float temp, int top_k, float top_p, float min_p, uint64_t seed = 42) {
    SamplingParams p;
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    return p;
}

// Logits whose softmax is exactly `probs`.
std::vector<float> logits_of(const std::vector<double>& probs) {
    std::vector<float> l;
    for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
    return l;
}

std::vector<TokenProb> dist(const SamplingParams& p, const std::vector<float>& logits) {
    std::vector<TokenProb> out;
    Sampler(p).distribution(logits.data(), static_cast<int>(logits.size()), out);
    return out;
}

// Checks ids and probabilities of a distribution against hand-computed values.
void expect_dist(const std::vector<TokenProb>& got, const std::vector<int32_t>& ids,
                 const std::vector<double>& probs) {
    ASSERT_EQ(got.size(), ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
        EXPECT_EQ(got[k].id, ids[k]) << "rank " << k;
        EXPECT_NEAR(got[k].p, probs[k], 1e-5) << "rank " << k;
    }
}

std::vector<float> random_logits(int n, uint32_t seed, float scale = 3.f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, scale);
    std::vector<float> l(n);
    for (float& x : l) x = nd(rng);
    return l;
}

// ---------------------------------------------------------------------------------------------

TEST(Sampling, ArgmaxTiesGoToLowestId) {
    const float a[] = {1, 3, 3, 2};
    EXPECT_EQ(argmax(a, 4), 1);
    const float b[] = {5, 5, 5};
    EXPECT_EQ(argmax(b, 3), 0);
    const float c[] = {-INFINITY, -1, 7, 7.5f, 7.5f};
    EXPECT_EQ(argmax(c, 5), 3);
    EXPECT_THROW(argmax(c, 0), Error);
}

// The chunked argmax against the one-compare-per-token rule it replaces, over vocabulary sizes
// around its chunk and lane widths, with ties, infinities and NaNs placed across chunk edges.
TEST(Sampling, ArgmaxEqualsTheScalarRuleOnLargeVocabularies) {
    auto scalar = [](const std::vector<float>& x) {
        int best = 0;
        for (int i = 1; i < int(x.size()); ++i) {
            if (x[i] > x[best]) best = i;
        }
        return best;
    };
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> few(0, 5);
    for (int n : {1, 2, 15, 16, 17, 1023, 1024, 1025, 3000, 128256, 151936}) {
        for (int trial = 0; trial < 12; ++trial) {
            std::vector<float> x(static_cast<size_t>(n));
            // Few distinct values: ties everywhere, also across chunk boundaries.
            for (float& v : x) v = float(few(rng));
            if (trial % 3 == 1) x[size_t(rng() % n)] = NAN;
            if (trial % 3 == 2) x[0] = NAN;
            if (trial % 4 == 3) x[size_t(rng() % n)] = INFINITY;
            if (trial == 5) std::fill(x.begin(), x.end(), -INFINITY);
            EXPECT_EQ(argmax(x.data(), n), scalar(x)) << "n " << n << " trial " << trial;
        }
    }
}

TEST(Sampling, GreedyIsArgmaxAndLeavesTheRngAlone) {
    const std::vector<float> l = {0.5f, 2.f, 2.f, -1.f};
    Sampler greedy(params(0.f, 40, 0.95f, 0.05f, 7));
    Sampler fresh(params(0.f, 40, 0.95f, 0.05f, 7));
    EXPECT_TRUE(greedy.greedy());
    for (int k = 0; k < 5; ++k) EXPECT_EQ(greedy.sample(l.data(), 4), 1);
    expect_dist(dist(params(-1.f, 0, 1.f, 0.f), l), {1}, {1.0});
    EXPECT_EQ(greedy.uniform(), fresh.uniform());  // sample() drew nothing
}

TEST(Sampling, PlainSoftmaxWhenEveryFilterIsOff) {
    // probs 0.1 0.2 0.3 0.4, sorted descending with their ids.
    auto got = dist(params(1.f, 0, 1.f, 0.f), logits_of({0.1, 0.2, 0.3, 0.4}));
    expect_dist(got, {3, 2, 1, 0}, {0.4, 0.3, 0.2, 0.1});
}

TEST(Sampling, TopKKeepsTheKHighestWithLowIdsWinningTies) {
    auto got = dist(params(1.f, 2, 1.f, 0.f), {1.f, 5.f, 3.f, 5.f, 2.f});
    expect_dist(got, {1, 3}, {0.5, 0.5});
    got = dist(params(1.f, 2, 1.f, 0.f), {4.f, 2.f, 4.f, 4.f});  // three-way tie for 2 places
    expect_dist(got, {0, 2}, {0.5, 0.5});
    got = dist(params(1.f, 100, 1.f, 0.f), {0.f, 0.f});  // k > vocab: everything
    expect_dist(got, {0, 1}, {0.5, 0.5});
}

TEST(Sampling, TopPKeepsSmallestPrefixReachingP) {
    const auto l = logits_of({0.5, 0.3, 0.15, 0.05});
    expect_dist(dist(params(1.f, 0, 0.75f, 0.f), l), {0, 1}, {0.625, 0.375});
    expect_dist(dist(params(1.f, 0, 0.85f, 0.f), l), {0, 1, 2},
                {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95});
    expect_dist(dist(params(1.f, 0, 0.1f, 0.f), l), {0}, {1.0});  // at least one token
    expect_dist(dist(params(1.f, 0, 0.f, 0.f), l), {0}, {1.0});
}

TEST(Sampling, TopPUsesTheSoftmaxOfTheTopKSurvivors) {
    const auto l = logits_of({0.4, 0.3, 0.2, 0.1});
    // Without top-k, 0.4 < 0.5 so two tokens are needed; after top-k 2 the first one is 4/7.
    EXPECT_EQ(dist(params(1.f, 0, 0.5f, 0.f), l).size(), 2u);
    expect_dist(dist(params(1.f, 2, 0.5f, 0.f), l), {0}, {1.0});
}

TEST(Sampling, MinPKeepsTokensWithinFactorOfTheBest) {
    const auto l = logits_of({0.05, 0.5, 0.3, 0.15});
    // threshold 0.2 * 0.5 = 0.1: 0.05 goes
    expect_dist(dist(params(1.f, 0, 1.f, 0.2f), l), {1, 2, 3},
                {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95});
    expect_dist(dist(params(1.f, 0, 1.f, 0.61f), l), {1}, {1.0});
    expect_dist(dist(params(1.f, 0, 1.f, 5.f), l), {1}, {1.0});  // > 1 still keeps the best
}

TEST(Sampling, MinPRunsAfterTopP) {
    const auto l = logits_of({0.4, 0.3, 0.2, 0.1});
    // llama.cpp order: top-p 0.75 on (.4 .3 .2 .1) keeps 3 (cum .9); min-p 0.4 (threshold .16 of
    // the original, .178 after renormalising) keeps those 3. Min-p first would renormalise to
    // (.444 .333 .222) and top-p would then stop after 2.
    expect_dist(dist(params(1.f, 0, 0.75f, 0.4f), l), {0, 1, 2}, {4 / 9., 3 / 9., 2 / 9.});
}

TEST(Sampling, TemperatureIsAppliedAfterTheFilters) {
    const float ln2 = std::log(2.f);
    expect_dist(dist(params(0.5f, 0, 1.f, 0.f), {0.f, ln2}), {1, 0}, {0.8, 0.2});
    expect_dist(dist(params(2.f, 0, 1.f, 0.f), {0.f, 2 * ln2}), {1, 0}, {2 / 3., 1 / 3.});
    // min-p 0.2 on the untempered (.5 .3 .15 .05) drops .05; with temp 2 the survivors get
    // probabilities proportional to sqrt(p). (On tempered logits .05 would survive.)
    const auto l = logits_of({0.5, 0.3, 0.15, 0.05});
    const double s = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15);
    expect_dist(dist(params(2.f, 0, 1.f, 0.2f), l), {0, 1, 2},
                {std::sqrt(0.5) / s, std::sqrt(0.3) / s, std::sqrt(0.15) / s});
}

TEST(Sampling, BannedTokensAreNeverCandidates) {
    // With every filter off a -inf token would otherwise stay as a p = 0 candidate, and a draw's
    // rounding leftover goes to the last candidate.
    const std::vector<float> l = {-INFINITY, 1.f, -INFINITY, 0.f, -INFINITY};
    expect_dist(dist(params(1.f, 0, 1.f, 0.f), l), {1, 3},
                {std::exp(1.0) / (std::exp(1.0) + 1), 1 / (std::exp(1.0) + 1)});
    expect_dist(dist(params(1.f, 4, 1.f, 0.f), l), {1, 3},
                {std::exp(1.0) / (std::exp(1.0) + 1), 1 / (std::exp(1.0) + 1)});
}

TEST(Sampling, BadInputThrows) {
    Sampler s(params(1.f, 0, 1.f, 0.f));
    std::vector<TokenProb> out;
    const float nan_logits[] = {0.f, NAN, 1.f};
    EXPECT_THROW(s.distribution(nan_logits, 3, out), Error);
    const float neg_inf[] = {-INFINITY, -INFINITY};
    EXPECT_THROW(s.distribution(neg_inf, 2, out), Error);
    EXPECT_THROW(s.sample(nan_logits, 0), Error);
    EXPECT_THROW(Sampler(params(NAN, 0, 1.f, 0.f)), Error);
    EXPECT_THROW(Sampler(params(INFINITY, 0, 1.f, 0.f)), Error);
    EXPECT_THROW(Sampler(params(1.f, 0, NAN, 0.f)), Error);
}

// Straightforward version of the chain on probabilities (full sort, renormalise after every
// step), to check the optimised one on a large vocabulary.
std::vector<TokenProb> reference_chain(const SamplingParams& p, const std::vector<float>& logits) {
    std::vector<std::pair<float, int>> c;
    for (int i = 0; i < static_cast<int>(logits.size()); ++i) c.push_back({logits[i], i});
    std::sort(c.begin(), c.end(), [](auto a, auto b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    if (p.top_k > 0 && p.top_k < static_cast<int>(c.size())) c.resize(p.top_k);
    auto softmax = [&](double temp) {
        std::vector<double> pr;
        double sum = 0;
        for (auto& [l, id] : c) sum += std::exp((l - c[0].first) / temp);
        for (auto& [l, id] : c) pr.push_back(std::exp((l - c[0].first) / temp) / sum);
        return pr;
    };
    if (p.top_p < 1.f) {
        auto pr = softmax(1.0);
        double cum = 0;
        size_t keep = c.size();
        for (size_t k = 0; k < pr.size(); ++k) {
            cum += pr[k];
            if (cum >= p.top_p) {
                keep = k + 1;
                break;
            }
        }
        c.resize(keep);
    }
    if (p.min_p > 0.f) {
        auto pr = softmax(1.0);
        size_t keep = 0;
        while (keep < pr.size() && pr[keep] >= p.min_p * pr[0]) ++keep;
        c.resize(std::max<size_t>(keep, 1));
    }
    auto pr = softmax(p.temp);
    std::vector<TokenProb> out;
    for (size_t k = 0; k < c.size(); ++k) out.push_back({c[k].second, static_cast<float>(pr[k])});
    return out;
}

TEST(Sampling, MatchesStraightforwardChainOnLargeVocab) {
    const SamplingParams cases[] = {
        params(0.8f, 40, 0.95f, 0.05f),  // llama.cpp defaults
        params(1.0f, 0, 0.9f, 0.f),      // nucleus only, no top-k
        params(0.7f, 0, 0.999f, 0.f),    // large nucleus
        params(1.0f, 0, 0.95f, 0.02f),   // nucleus and min-p on the full vocabulary
        params(1.0f, 5000, 0.8f, 0.f),   // large top-k, then nucleus
        params(1.5f, 0, 1.f, 0.3f),      // min-p only
        params(1.0f, 1000, 1.f, 0.f),    // top-k only
        params(0.3f, 200, 0.5f, 0.01f),  // all together
    };
    // Peaked (std 3) and nearly flat (std 0.05) logits: small and huge nuclei.
    for (float scale : {3.f, 0.05f}) {
        const auto logits = random_logits(32000, 99, scale);  // > the histogram threshold
        for (const SamplingParams& p : cases) {
            SCOPED_TRACE(::testing::Message()
                         << "scale " << scale << " temp " << p.temp << " top_k " << p.top_k
                         << " top_p " << p.top_p << " min_p " << p.min_p);
            auto want = reference_chain(p, logits);
            auto got = dist(p, logits);
            ASSERT_EQ(got.size(), want.size());
            double sum = 0;
            for (size_t k = 0; k < got.size(); ++k) {
                ASSERT_EQ(got[k].id, want[k].id) << "rank " << k;
                ASSERT_NEAR(got[k].p, want[k].p, 1e-7 + 1e-4 * want[k].p) << "rank " << k;
                sum += got[k].p;
            }
            EXPECT_NEAR(sum, 1.0, 1e-4);
        }
    }
}

TEST(Sampling, SameSeedSameTokensDifferentSeedDifferentTokens) {
    const auto p = params(1.0f, 0, 1.f, 0.f, 1234);
    Sampler a(p), b(p), c(params(1.0f, 0, 1.f, 0.f, 4321));
    std::vector<int32_t> ta, tb, tc;
    for (int step = 0; step < 200; ++step) {
        const auto logits = random_logits(64, step, 1.f);
        ta.push_back(a.sample(logits.data(), 64));
        tb.push_back(b.sample(logits.data(), 64));
        tc.push_back(c.sample(logits.data(), 64));
    }
    EXPECT_EQ(ta, tb);
    EXPECT_NE(ta, tc);
    EXPECT_EQ(a.seed(), 1234u);
    // The "random" seed draws from random_device: two samplers almost surely differ.
    Sampler r1(params(1.f, 0, 1.f, 0.f, 0xFFFFFFFFu)), r2(params(1.f, 0, 1.f, 0.f, 0xFFFFFFFFu));
    EXPECT_NE(r1.seed(), r2.seed());
    for (int k = 0; k < 100; ++k) {
        double u = a.uniform();
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
    }
}

TEST(Sampling, SampleDoesNotAllocateOnceWarmed) {
    const auto logits = random_logits(32000, 5);
    Sampler s(params(0.8f, 40, 0.95f, 0.05f));
    Sampler nucleus(params(1.f, 0, 0.9f, 0.f));
    s.sample(logits.data(), 32000);  // warm up the scratch buffers
    nucleus.sample(logits.data(), 32000);
    const long before = g_allocs.load();
    for (int k = 0; k < 20; ++k) {
        s.sample(logits.data(), 32000);
        nucleus.sample(logits.data(), 32000);
    }
    EXPECT_EQ(g_allocs.load() - before, 0);
    std::vector<TokenProb> fresh;  // the counter works: a fresh output vector allocates
    s.distribution(logits.data(), 32000, fresh);
    EXPECT_GT(g_allocs.load() - before, 0);
}

TEST(Sampling, EmpiricalFrequenciesMatchDistribution) {
    const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.9f, -3.0f};
    const auto p = params(0.7f, 6, 0.95f, 0.05f, 2024);
    Sampler s(p);
    std::vector<TokenProb> d;
    s.distribution(logits.data(), 8, d);
    ASSERT_GE(d.size(), 3u);
    std::vector<double> expect(8, 0.0);
    for (const TokenProb& t : d) expect[t.id] = t.p;

    const int n = 100000;
    std::vector<int> count(8, 0);
    for (int k = 0; k < n; ++k) count[s.sample(logits.data(), 8)]++;
    double chi2 = 0;
    for (int id = 0; id < 8; ++id) {
        if (expect[id] == 0) {
            EXPECT_EQ(count[id], 0) << "token " << id << " is outside the distribution";
            continue;
        }
        const double e = n * expect[id];
        chi2 += (count[id] - e) * (count[id] - e) / e;
    }
    // d.size() - 1 degrees of freedom (<= 5): the 1e-4 critical value is < 26.
    EXPECT_LT(chi2, 26.0) << "chi-square " << chi2;
}

}  // namespace
