// Adaptive draft length (speculative/draft_length/draft_length.h) on synthetic acceptance and cost
// numbers: the estimates converge to the true acceptance, and the closed loop (the controller
// choosing N over the engine's pass-cost model, speculative/draft_length/pass_cost.h, outcomes
// drawn from known per-position acceptance) reaches within 5% of the best fixed N's analytic
// throughput in several regimes, including a change of regime.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "speculative/draft_length/draft_length.h"

using namespace specula;

namespace {

struct World {
    std::function<double(int)> accept;           // conditional acceptance at position i (1-based)
    double t0, t1;                               // target pass: t0 + t1 (b - 1) ms ...
    double draft;                                // ms per draft step
    std::function<double(int)> curve = nullptr;  // ... unless a cost curve is given
    double target(int b) const { return curve ? curve(b) : t0 + t1 * (b - 1); }
    double expected_tokens(int n) const {
        double e = 1, run = 1;
        for (int i = 1; i <= n; ++i) e += run *= accept(i);
        return e;
    }
    double rate(int n) const { return expected_tokens(n) / (n * draft + target(n + 1)); }
    double best_rate(int n_max) const {
        double best = 0;
        for (int n = 0; n <= n_max; ++n) best = std::max(best, rate(n));
        return best;
    }
};

// A controller and the pass costs it reads (the engine's, in a real run).
struct Ctl {
    DraftLengthController c;
    PassCost cost;
    int choose() const { return c.choose(cost); }
    int best() const { return c.best(cost); }
    const DraftLengthParams& params() const { return c.params(); }
};

// Runs the closed loop for `steps` steps; returns the realised tokens per ms.
double simulate(Ctl& ctl, const World& w, int steps, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(0, 1);
    double tokens = 0, ms = 0;
    for (int s = 0; s < steps; ++s) {
        const int n = ctl.choose();  // 0: a plain step
        int k = 0;
        while (k < n && u(rng) < w.accept(k + 1)) ++k;
        ctl.c.observe_draft(n, n * w.draft);
        ctl.cost.observe(n + 1, w.target(n + 1));
        ctl.c.observe_accept(n, k);
        tokens += k + 1;
        ms += n * w.draft + w.target(n + 1);
    }
    return tokens / ms;
}

void expect_near_best(const World& w, const char* what) {
    Ctl ctl;
    std::mt19937_64 rng(2024);
    simulate(ctl, w, 300, rng);  // warm-up
    const double realised = simulate(ctl, w, 3000, rng);
    const double best = w.best_rate(ctl.params().n_max);
    EXPECT_GE(realised, 0.95 * best) << what << ": chose N=" << ctl.best();
}

}  // namespace

TEST(DraftLength, StartsInTheMiddleBeforeAnyMeasurement) {
    Ctl ctl;
    EXPECT_EQ(ctl.choose(), 4);
    EXPECT_NEAR(ctl.c.accept_estimate(1), ctl.params().prior_accept, 1e-12);
}

TEST(DraftLength, ExtrapolatesTheTargetCostLine) {
    PassCost cost;
    for (int rep = 0; rep < 3; ++rep)
        for (int b = 1; b <= 5; ++b) cost.observe(b, 10.0 + 2.0 * (b - 1));
    EXPECT_NEAR(cost.cost(1), 10.0, 1e-6);
    EXPECT_NEAR(cost.cost(9), 26.0, 1e-6);
}

TEST(DraftLength, EstimatesConvergeToTheTrueAcceptance) {
    DraftLengthController ctl;
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(0, 1);
    for (int s = 0; s < 4000; ++s) {
        int k = 0;
        while (k < 6 && u(rng) < 0.7) ++k;
        ctl.observe_accept(6, k);
    }
    for (int i = 1; i <= 4; ++i) EXPECT_NEAR(ctl.accept_estimate(i), 0.7, 0.06) << "pos " << i;
    const double e = 1 + 0.7 + 0.49 + 0.343;
    EXPECT_NEAR(ctl.expected_tokens(3), e, 0.15);
}

TEST(DraftLength, PicksShortDraftsWhenAcceptanceIsLowAndDraftingCostly) {
    World w{[](int) { return 0.35; }, 10, 0.5, 2};
    ASSERT_GT(w.rate(1), w.rate(0));
    ASSERT_GT(w.rate(1), w.rate(2));
    expect_near_best(w, "low acceptance");
    Ctl ctl;
    std::mt19937_64 rng(1);
    simulate(ctl, w, 500, rng);
    EXPECT_EQ(ctl.best(), 1);
}

// Drafting that loses (a draft as slow as half a target pass, acceptance 0.15): steps decode
// plainly, at plain decoding's rate; when the text turns predictable, drafting comes back.
TEST(DraftLength, FallsBackToPlainDecodingWhenDraftingLoses) {
    World bad{[](int) { return 0.15; }, 10, 0.5, 5};
    ASSERT_GT(bad.rate(0), bad.rate(1));
    expect_near_best(bad, "drafting loses");
    Ctl ctl;
    std::mt19937_64 rng(1);
    simulate(ctl, bad, 500, rng);
    EXPECT_EQ(ctl.best(), 0);
    World good{[](int) { return 0.9; }, 10, 0.5, 0.5};
    simulate(ctl, good, 1000, rng);
    EXPECT_GT(ctl.best(), 2);
    EXPECT_GE(simulate(ctl, good, 2000, rng), 0.95 * good.best_rate(ctl.params().n_max));
}

TEST(DraftLength, PicksLongDraftsWhenAcceptanceIsHighAndDraftingCheap) {
    World w{[](int) { return 0.95; }, 10, 0.05, 0.1};
    expect_near_best(w, "high acceptance");
    Ctl ctl;
    std::mt19937_64 rng(1);
    simulate(ctl, w, 500, rng);
    EXPECT_GE(ctl.best(), 10);
}

TEST(DraftLength, WithinFivePercentOfBestFixedLength) {
    expect_near_best({[](int) { return 0.7; }, 10, 0.3, 0.5}, "a=0.7, c=0.05");
    expect_near_best({[](int) { return 0.5; }, 10, 0.1, 1.0}, "a=0.5, c=0.1");
    expect_near_best({[](int) { return 0.85; }, 20, 1.0, 0.2}, "a=0.85, steep target");
    // Acceptance that collapses after position 3 (e.g. a draft that knows a short phrase).
    expect_near_best({[](int i) { return i <= 3 ? 0.9 : 0.2; }, 10, 0.2, 0.5}, "cliff at 3");
}

TEST(DraftLength, UsesMeasuredCostsOfACurvedCostProfile) {
    // Passes over 2k-1 and 2k tokens cost the same (as with 2-token kernel tiles): odd drafts
    // (even batches) are free riders, which a straight-line cost model cannot see.
    World w{[](int) { return 0.75; }, 0, 0, 0.3, [](int b) { return 10.0 * ((b + 1) / 2); }};
    expect_near_best(w, "stepped cost");
    Ctl ctl;
    std::mt19937_64 rng(3);
    simulate(ctl, w, 1000, rng);
    EXPECT_EQ(ctl.best() % 2, 1) << "N + 1 should fill a tile";
}

TEST(DraftLength, FollowsAChangeOfRegime) {
    Ctl ctl;
    std::mt19937_64 rng(5);
    World good{[](int) { return 0.9; }, 10, 0.1, 0.2};
    World bad{[](int) { return 0.2; }, 10, 0.1, 0.2};
    simulate(ctl, good, 1000, rng);
    const int n_good = ctl.best();
    simulate(ctl, bad, 1500, rng);
    EXPECT_LT(ctl.best(), n_good);
    EXPECT_GE(simulate(ctl, bad, 2000, rng), 0.95 * bad.best_rate(ctl.params().n_max));
}

TEST(DraftLength, OneEarlyRejectionDoesNotTrapItInShortDrafts) {
    // Flat-ish target costs and cheap drafts: with acceptance 0.8 the best length is long.
    World w{[](int) { return 0.8; }, 50, 1.0, 0.1};
    Ctl ctl;
    ctl.c.observe_draft(4, 0.4);
    ctl.cost.observe(5, w.target(5));
    ctl.c.observe_accept(4, 1);  // unlucky first draft: rejected at position 2
    EXPECT_GT(ctl.best(), 2);
    std::mt19937_64 rng(11);
    EXPECT_GE(simulate(ctl, w, 2000, rng), 0.95 * w.best_rate(ctl.params().n_max));
}

TEST(DraftLength, SlowOutliersDoNotDistortTheCosts) {
    PassCost cost;
    cost.observe(5, 400.0);  // a cold first pass on a busy machine
    for (int i = 0; i < 4; ++i) cost.observe(5, 100.0);
    cost.observe(5, 900.0);  // a preempted pass
    EXPECT_DOUBLE_EQ(cost.cost(5), 100.0);
}
