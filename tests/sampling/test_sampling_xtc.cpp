// XTC in the Sampler (sampling/sampler.h): hand-computed mixtures (the coin's two outcomes, with
// and without temperature, top-k and min-p before it), the cases where it removes nothing (one
// token over the threshold, a threshold over 0.5, probability 0, greedy), probability 1 removing
// the top choices outright, and draws from sample() following distribution() (chi-square).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "chi_square.h"
#include "common/error.h"
#include "sampling/sampler.h"

using namespace specula;

namespace {

// Logits whose softmax (temperature 1) is 0.5, 0.3, 0.15, 0.05.
const std::vector<float> kRow = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};

SamplingParams xtc(float prob, float threshold, float temp = 1.0f) {
    SamplingParams p;
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 1;
    p.xtc_probability = prob;
    p.xtc_threshold = threshold;
    return p;
}

std::map<int32_t, double> dist(const SamplingParams& p, const std::vector<float>& row = kRow) {
    std::vector<TokenProb> out;
    Sampler(p).distribution(row.data(), int(row.size()), out);
    std::map<int32_t, double> m;
    for (size_t i = 0; i < out.size(); ++i) {
        m[out[i].id] = out[i].p;
        if (i > 0) EXPECT_GE(out[i - 1].p, out[i].p) << "not sorted by probability";
    }
    return m;
}

void expect_near(const std::map<int32_t, double>& got, const std::map<int32_t, double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [id, p] : want) EXPECT_NEAR(got.at(id), p, 1e-6) << "token " << id;
}

}  // namespace

TEST(Xtc, MixesKeepingAndRemovingTheTopChoices) {
    // Threshold 0.2: tokens 0 and 1 reach it, so the coin removes token 0 (all but the last of
    // them); half the time: 0.5 * p, and the rest 0.5 * p + 0.5 * p / 0.5.
    expect_near(dist(xtc(0.5f, 0.2f)), {{0, 0.25}, {1, 0.45}, {2, 0.225}, {3, 0.075}});
    // Probability 1: token 0 is never a candidate.
    expect_near(dist(xtc(1.0f, 0.2f)), {{1, 0.6}, {2, 0.3}, {3, 0.1}});
    // Threshold 0.1: three tokens reach it, two are removed.
    expect_near(
        dist(xtc(0.25f, 0.1f)),
        {{0, 0.375}, {1, 0.225}, {2, 0.75 * 0.15 + 0.25 * 0.75}, {3, 0.75 * 0.05 + 0.25 * 0.25}});
}

TEST(Xtc, ThresholdIsTestedBeforeTemperature) {
    // At temperature 2 the tempered probabilities are flatter, but which tokens reach the
    // threshold is decided on the untempered ones (0.5, 0.3 >= 0.2; 0.15 is not).
    const auto t = dist(xtc(0.0f, 0.2f, 2.0f));  // XTC off: the tempered row
    const double rest = t.at(1) + t.at(2) + t.at(3);
    expect_near(dist(xtc(0.5f, 0.2f, 2.0f)), {{0, 0.5 * t.at(0)},
                                              {1, 0.5 * t.at(1) + 0.5 * t.at(1) / rest},
                                              {2, 0.5 * t.at(2) + 0.5 * t.at(2) / rest},
                                              {3, 0.5 * t.at(3) + 0.5 * t.at(3) / rest}});
}

TEST(Xtc, RunsOnTheCandidatesLeftByTopKAndMinP) {
    // min-p 0.5 keeps tokens 0 and 1 (0.5 / 0.8 = 0.625, 0.3 / 0.8 = 0.375 over them): both reach
    // 0.3, so token 0 goes.
    SamplingParams p = xtc(1.0f, 0.3f);
    p.min_p = 0.5f;
    expect_near(dist(p), {{1, 1.0}});
    // top-k 1 leaves one candidate: nothing to remove.
    p = xtc(1.0f, 0.1f);
    p.top_k = 1;
    expect_near(dist(p), {{0, 1.0}});
}

TEST(Xtc, CasesThatRemoveNothing) {
    const auto plain = dist(xtc(0.0f, 0.1f));
    expect_near(dist(xtc(1.0f, 0.4f)), plain);   // only token 0 reaches 0.4
    expect_near(dist(xtc(1.0f, 0.51f)), plain);  // over 0.5: off
    // Greedy takes the best token whatever XTC says (ik_llama.cpp's greedy path).
    expect_near(dist(xtc(1.0f, 0.1f, 0.0f)), {{0, 1.0}});
    EXPECT_THROW(Sampler(xtc(1.5f, 0.1f)), Error);
    EXPECT_THROW(Sampler(xtc(0.5f, -0.1f)), Error);
    EXPECT_THROW(Sampler(xtc(NAN, 0.1f)), Error);
}

TEST(Xtc, DrawsFollowTheMixture) {
    const SamplingParams p = xtc(0.5f, 0.2f);
    Sampler s(p);
    const auto want = dist(p);
    constexpr int kDraws = 40000;
    std::map<int32_t, long> counts;
    for (int i = 0; i < kDraws; ++i) ++counts[s.sample(kRow.data(), int(kRow.size()))];
    std::map<int32_t, double> expected(want.begin(), want.end());
    const test::ChiSquare c = test::chi_square(expected, counts, kDraws);
    EXPECT_LT(c.stat, c.critical) << "chi2 " << c.stat << " df " << c.df;
}
