// verify() as the pure function it is (speculative/verifier.h): hand-made logit rows, no model.
// Greedy: the accepted prefix, the recovered token at the first mismatch, the bonus token after a
// fully accepted draft. Sampling: a draft token the target gives probability 0 is always
// rejected and the recovered token comes from the residual max(0, p - q), never the draft token;
// a draft equal to a one-hot target is always accepted. Synthetic acceptance 0 / 1 rejects /
// accepts everything. The inputs are left as they were.
#include <gtest/gtest.h>

#include <vector>

#include "speculative/verifier.h"

using namespace specula;

namespace {

constexpr int kVocab = 6;
constexpr float kNeg = -1e4f;  // logit of a token the target never picks

// Rows whose argmax (and, at low temperature, only candidate) is best[i].
struct Rows {
    std::vector<std::vector<float>> data;
    std::vector<const float*> ptrs;
    explicit Rows(const std::vector<token_id>& best) {
        for (token_id b : best) {
            std::vector<float> r(kVocab, kNeg);
            r[size_t(b)] = 5.f;
            data.push_back(r);
        }
        for (const auto& r : data) ptrs.push_back(r.data());
    }
    LogitRows view() const { return LogitRows{ptrs, kVocab}; }
};

Draft draft_of(const std::vector<token_id>& tokens) {
    Draft d;
    d.tokens = tokens;
    return d;
}

Sampler sampler(float temp) {
    SamplingParams p;
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.f;
    p.min_p = 0.f;
    p.seed = 11;
    return Sampler(p);
}

}  // namespace

TEST(SpecVerifier, GreedyAcceptsTheAgreeingPrefix) {
    Sampler s = sampler(0.f);
    VerifyScratch scratch(kVocab);
    const Rows rows({1, 2, 3, 4});
    // All three accepted: the bonus token is the argmax of the last row.
    Verdict v = verify(draft_of({1, 2, 3}), rows.view(), s, scratch);
    EXPECT_EQ(v.n_accepted, 3);
    EXPECT_EQ(v.token, 4);
    EXPECT_TRUE(v.bonus);
    // Rejected at the second: the recovered token is the target's there.
    v = verify(draft_of({1, 5, 3}), rows.view(), s, scratch);
    EXPECT_EQ(v.n_accepted, 1);
    EXPECT_EQ(v.token, 2);
    EXPECT_FALSE(v.bonus);
    // An empty draft: a plain step, the target's own token as the bonus.
    v = verify(draft_of({}), rows.view(), s, scratch);
    EXPECT_EQ(v.n_accepted, 0);
    EXPECT_EQ(v.token, 1);
    EXPECT_TRUE(v.bonus);
}

TEST(SpecVerifier, SamplingRejectsWhatTheTargetNeverPicks) {
    VerifyScratch scratch(kVocab);
    const Rows rows({1, 2, 3});
    for (int trial = 0; trial < 50; ++trial) {
        Sampler s = sampler(1.f);
        for (int k = 0; k < trial; ++k) s.uniform();  // vary the draws
        // d_1 = 1 agrees with a one-hot target (always accepted); d_2 = 0 has p = 0.
        const Draft d = draft_of({1, 0});
        const Verdict v = verify(d, rows.view(), s, scratch);
        EXPECT_EQ(v.n_accepted, 1);
        EXPECT_EQ(v.token, 2) << "recovered from max(0, p - q), not the draft token";
        EXPECT_FALSE(v.bonus);
        EXPECT_EQ(d.tokens, (std::vector<token_id>{1, 0}));
    }
    for (float x : scratch.dense) EXPECT_EQ(x, 0.f) << "scratch left clean";
}

TEST(SpecVerifier, SamplingWithDraftProbabilities) {
    VerifyScratch scratch(kVocab);
    const Rows rows({3, 4});
    Sampler s = sampler(1.f);
    // q puts its mass on the target's token: accepted, then a bonus from the last row.
    Draft d = draft_of({3});
    d.has_q = true;
    d.q = {{{3, 1.f}}};
    const Verdict v = verify(d, rows.view(), s, scratch);
    EXPECT_EQ(v.n_accepted, 1);
    EXPECT_EQ(v.token, 4);
    EXPECT_TRUE(v.bonus);
}

TEST(SpecVerifier, SyntheticAcceptanceZeroAndOne) {
    const Rows rows({1, 2, 3});
    std::mt19937_64 rng(5);
    Sampler s = sampler(0.f);
    Verdict v = verify_synthetic(draft_of({5, 5}), rows.view(), s, 1.0, rng);
    EXPECT_EQ(v.n_accepted, 2);
    EXPECT_EQ(v.token, 3);
    EXPECT_TRUE(v.bonus);
    v = verify_synthetic(draft_of({1, 2}), rows.view(), s, 0.0, rng);
    EXPECT_EQ(v.n_accepted, 0);
    EXPECT_EQ(v.token, 1);
    EXPECT_FALSE(v.bonus);
}
