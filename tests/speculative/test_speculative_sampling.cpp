// Speculative sampling is exact: with the stories260K target and the llama2xs draft (which
// disagree a lot), the first two generated tokens, drawn thousands of times with fixed seeds
// through draft proposal + rejection sampling, follow the target's exact joint distribution
// p(t1) p(t2 | t1) after the temp/top-k/top-p/min-p transforms, and with locally typical
// sampling and top-n-sigma on too, and with XTC (Pearson chi-square). The same
// statistic rejects a naive verifier that keeps a draft token when it equals the target's argmax
// and otherwise takes a target sample, so the test has the power to see a biased verifier.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "chi_square.h"
#include "model/session.h"
#include "spec_sampling_fixture.h"
#include "speculative/drafters/categorical.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/verifier.h"
#include "test_util.h"

using namespace specula;

namespace {

using namespace specula::test;  // spec_sampling_fixture.h: kOneThread, kTrials, kDraft, ...
using Pair = TokenPair;

// The transforms every draw of one test uses: min-p 0.05, and typical / top-n-sigma when set.
struct Transforms {
    float typical_p = 1.0f, top_n_sigma = -1.0f;
    float xtc_probability = 0.0f, xtc_threshold = 0.1f;
};
Transforms g_transforms;

SamplingParams sampling(uint64_t seed) {
    SamplingParams p = spec_sampling(0.05f, seed);
    p.typical_p = g_transforms.typical_p;
    p.top_n_sigma = g_transforms.top_n_sigma;
    p.xtc_probability = g_transforms.xtc_probability;
    p.xtc_threshold = g_transforms.xtc_threshold;
    return p;
}

using Fixture = test::SpecModels;

// Exact p(t1) p(t2 | t1) of the target under the sampling transforms.
std::map<Pair, double> exact_joint(const Model& target, const std::vector<token_id>& prompt) {
    const int nv = target.hparams().n_vocab;
    Sampler s(sampling(1));
    Session sess(target, kOneThread);
    sess.eval(prompt);
    std::vector<TokenProb> p1, p2;
    s.distribution(sess.logits(sess.n_logits() - 1), nv, p1);
    std::map<Pair, double> joint;
    for (const TokenProb& a : p1) {
        sess.rollback(int(prompt.size()));
        sess.eval(std::vector<token_id>{a.id});
        s.distribution(sess.logits(0), nv, p2);
        for (const TokenProb& b : p2) joint[{a.id, b.id}] = double(a.p) * b.p;
    }
    return joint;
}

// The naive (biased) rule: keep d_i iff it is the target's most likely token, else sample p.
Verdict naive_verify(const Draft& draft, const LogitRows& rows, Sampler& s) {
    std::vector<TokenProb> p;
    Verdict r;
    for (int i = 0; i <= draft.size(); ++i) {
        s.distribution(rows[i], rows.n_vocab, p);
        if (i < draft.size() && draft.tokens[i] == p[0].id) continue;
        r.n_accepted = i;
        r.token = sample_categorical(p, s.uniform());
        break;
    }
    return r;
}

// Draws (t1, t2) kTrials times: draft kDraft tokens, verify in one target pass, repeat until two
// tokens exist. The target keeps the prompt cached and rolls back between trials.
std::map<Pair, long> sample_pairs(const Fixture& f, bool naive) {
    Session target(*f.target, kOneThread);
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling = sampling(99);
    DraftModelDrafter drafter(*f.draft, dp);
    const int nv = f.target->hparams().n_vocab;
    VerifyScratch scratch(nv);
    Sampler sampler(sampling(12345));
    Draft draft;
    std::vector<token_id> history, batch;
    std::vector<const float*> rows;
    std::map<Pair, long> counts;

    target.eval(std::span(f.prompt).first(f.prompt.size() - 1));
    drafter.begin(f.prompt);
    for (int t = 0; t < kTrials; ++t) {
        history = f.prompt;
        target.rollback(int(f.prompt.size()) - 1);
        while (history.size() < f.prompt.size() + 2) {
            drafter.propose(history, kDraft, draft);
            // What the generation loop does: one target pass, a verdict, a rollback.
            const int n_past = target.n_past();
            batch.assign(1, history.back());
            batch.insert(batch.end(), draft.tokens.begin(), draft.tokens.end());
            target.eval(batch);
            rows.clear();
            for (int i = 0; i < target.n_logits(); ++i) rows.push_back(target.logits(i));
            const LogitRows lr{rows, nv};
            const Verdict r =
                naive ? naive_verify(draft, lr, sampler) : verify(draft, lr, sampler, scratch);
            target.rollback(n_past + 1 + r.n_accepted);
            drafter.accept(r.n_accepted);
            for (int i = 0; i < r.n_accepted; ++i) history.push_back(draft.tokens[i]);
            history.push_back(r.token);
        }
        ++counts[{history[f.prompt.size()], history[f.prompt.size() + 1]}];
    }
    return counts;
}

}  // namespace

TEST(SpecSampling, FirstTwoTokensFollowTheTargetDistribution) {
    Fixture f;
    const auto exact = exact_joint(*f.target, f.prompt);
    const auto counts = sample_pairs(f, false);
    const test::ChiSquare c = test::chi_square(exact, counts, kTrials);
    std::printf("speculative: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f\n", c.stat, c.df,
                c.critical);
    ASSERT_GE(c.df, 5) << "too few bins for a meaningful test";
    EXPECT_LT(c.stat, c.critical);
}

// Typical sampling (which can drop the most likely token) and top-n-sigma reshape p; the
// verifier takes the target's and the drafter's distributions through the same Sampler, so the
// pairs still follow the target's transformed distribution.
TEST(SpecSampling, TypicalAndTopNSigmaKeepTheTargetDistribution) {
    g_transforms = {0.6f, 2.5f};
    Fixture f;
    const auto exact = exact_joint(*f.target, f.prompt);
    const auto counts = sample_pairs(f, false);
    // The transforms changed the distribution: fewer (t1, t2) pairs are possible.
    g_transforms = {};
    const auto plain = exact_joint(*f.target, f.prompt);
    EXPECT_LT(exact.size(), plain.size());
    const test::ChiSquare c = test::chi_square(exact, counts, kTrials);
    std::printf("typical + top-n-sigma: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f\n", c.stat,
                c.df, c.critical);
    ASSERT_GE(c.df, 3) << "too few bins for a meaningful test";
    EXPECT_LT(c.stat, c.critical);
}

// XTC's coin is a mixture in distribution(): the target's and the drafter's rows both carry it,
// and the pairs follow the target's mixture.
TEST(SpecSampling, XtcKeepsTheTargetDistribution) {
    g_transforms = {};
    g_transforms.xtc_probability = 0.6f;
    g_transforms.xtc_threshold = 0.08f;
    Fixture f;
    const auto exact = exact_joint(*f.target, f.prompt);
    const auto counts = sample_pairs(f, false);
    g_transforms = {};
    const auto plain = exact_joint(*f.target, f.prompt);
    // XTC moved mass off the likeliest pair.
    const auto top = std::max_element(plain.begin(), plain.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
    });
    EXPECT_LT(exact.at(top->first), top->second * 0.9);
    const test::ChiSquare c = test::chi_square(exact, counts, kTrials);
    std::printf("xtc: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f\n", c.stat, c.df, c.critical);
    ASSERT_GE(c.df, 5) << "too few bins for a meaningful test";
    EXPECT_LT(c.stat, c.critical);
}

TEST(SpecSampling, ChiSquareRejectsANaiveVerifier) {
    Fixture f;
    const auto exact = exact_joint(*f.target, f.prompt);
    const auto counts = sample_pairs(f, true);
    const test::ChiSquare c = test::chi_square(exact, counts, kTrials);
    std::printf("naive: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f\n", c.stat, c.df,
                c.critical);
    EXPECT_GT(c.stat, c.critical);
}
