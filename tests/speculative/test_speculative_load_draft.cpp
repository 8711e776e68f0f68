// Draft length by load (speculative/draft_length/load_draft.h): the pass cost model
// (speculative/draft_length/pass_cost.h) interpolates and extrapolates measured medians, and the
// chosen length shrinks as the pass becomes compute-bound with more slots; it explores neighbours
// on schedule.
#include <gtest/gtest.h>

#include "speculative/draft_length/load_draft.h"

namespace {

using specula::DraftLengthController;
using specula::LoadDraftLength;
using specula::LoadDraftParams;
using specula::PassCost;

TEST(PassCost, MediansInterpolationAndExtrapolation) {
    PassCost c;
    EXPECT_FALSE(c.measured());
    EXPECT_EQ(c.cost(5), 0);
    c.observe(4, 10);
    EXPECT_DOUBLE_EQ(c.cost(4), 10);
    EXPECT_GT(c.cost(8), 10);  // one measurement: the prior slope
    c.observe(4, 12);
    c.observe(4, 100);  // an outlier: the median of 10, 12, 100
    EXPECT_DOUBLE_EQ(c.cost(4), 12);
    c.observe(12, 20);
    EXPECT_DOUBLE_EQ(c.cost(8), 16);   // halfway between 4 and 12
    EXPECT_DOUBLE_EQ(c.cost(20), 28);  // the line through the last two, 1 ms a row
    EXPECT_DOUBLE_EQ(c.cost(1), 9);    // below the first: the same line (at least half of it)
}

// Slots that accept every draft; passes cost `flat` ms up to `knee` rows, then 1 ms a row.
int choice(int n_slots, double flat, int knee) {
    DraftLengthController ctl;
    for (int i = 0; i < 50; ++i) ctl.observe_accept(4, 3);  // 75 % acceptance
    std::vector<const DraftLengthController*> slots(size_t(n_slots), &ctl);
    LoadDraftParams p;
    p.explore_every = 0;
    LoadDraftLength ld(p);
    PassCost cost;
    for (int r = 1; r <= 160; ++r) cost.observe(r, r <= knee ? flat : flat + (r - knee));
    return ld.best(slots, 0, 0.1, cost);
}

TEST(LoadDraftLength, ShorterDraftsAsThePassBecomesComputeBound) {
    const int one = choice(1, 20, 16), four = choice(4, 20, 16), sixteen = choice(16, 20, 16);
    EXPECT_GE(one, 3);
    EXPECT_LE(four, one);
    EXPECT_LT(sixteen, one);
    EXPECT_GE(sixteen, 0);
}

TEST(LoadDraftLength, ExploresNeighboursAndStartsFromTheSlotsOwnChoice) {
    DraftLengthController ctl;
    std::vector<const DraftLengthController*> slots{&ctl};
    LoadDraftParams p;
    p.explore_every = 2;
    LoadDraftLength ld(p);
    PassCost cost;
    EXPECT_EQ(ld.best(slots, 0, 0.1, cost), -1);  // nothing measured
    const int first = ld.choose(slots, 0, 0.1, cost);
    EXPECT_EQ(first, std::clamp(ctl.choose(cost), 0, p.n_max));
    for (int r = 1; r <= 20; ++r) cost.observe(r, 10);  // rows are free: draft long
    EXPECT_EQ(ld.best(slots, 0, 0.0, cost), p.n_max);
    EXPECT_EQ(ld.choose(slots, 0, 0.0, cost), p.n_max - 1);  // the 2nd choice explores below
    EXPECT_EQ(ld.last(), p.n_max - 1);
    EXPECT_TRUE(ld.best({}, 0, 0.1, cost) == -1);
}

}  // namespace
