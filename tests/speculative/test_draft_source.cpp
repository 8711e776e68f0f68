// Draft source by cost (speculative/draft_length/draft_source.h, `--draft auto` with --spec-type
// suffix -md): the choice on given pass costs, draft-step costs and acceptances (computed by hand
// below: the free draft wins unless the model's better acceptance pays for its passes; a cheaper
// model step or a worse tree flips it; a plain pass when neither pays; exploration takes the
// other drafting source every k-th step), and on
// stories260K with the llama2xs draft model, greedy output with the choice on equals plain
// decoding, with both sources chosen.
#include <gtest/gtest.h>

#include <cstdio>

#include "model/session.h"
#include "speculative/draft_length/draft_source.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/suffix_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

using namespace specula;

namespace {

// A pass over b rows costs 10 + 0.5 (b - 1) ms (every count measured).
PassCost linear_cost() {
    PassCost c(32);
    for (int b = 1; b <= 32; ++b) c.observe(b, 10.0 + 0.5 * (b - 1));
    return c;
}

// A source that accepted `accepted` of every `drafted`-token draft, `steps` times, each draft
// evaluation costing step_ms.
DraftLengthController source(int drafted, int accepted, int steps, double step_ms) {
    DraftLengthController c;
    for (int i = 0; i < steps; ++i) {
        c.observe_accept(drafted, accepted);
        if (step_ms > 0) c.observe_draft(drafted, drafted * step_ms);
    }
    return c;
}

}  // namespace

TEST(DraftSource, OptionIsExpectedTokensOverDraftAndPassTime) {
    const PassCost cost = linear_cost();
    const DraftLengthController model = source(4, 4, 400, 2.0);  // ~always accepted, 2 ms/step
    const DraftOption o = draft_option(model, 4, cost);
    EXPECT_EQ(o.n, 4);
    EXPECT_NEAR(o.ms, 4 * 2.0 + 12.0, 1e-9);  // 4 draft steps + a 5-row pass
    EXPECT_GT(o.tokens, 4.8);                 // E(4) -> 5 as the acceptance -> 1
    EXPECT_LE(o.tokens, 5.0);
    EXPECT_NEAR(o.rate(), o.tokens / o.ms, 1e-12);
    // The free draft of the same length and acceptance costs only the pass: it wins.
    const DraftLengthController tree = source(4, 4, 400, 0.0);
    EXPECT_NEAR(draft_option(tree, 4, cost).ms, 12.0, 1e-9);
    EXPECT_TRUE(prefer_free(draft_option(tree, 4, cost), o));
}

TEST(DraftSource, ModelWinsOnlyWhenItsAcceptancePaysForItsPasses) {
    const PassCost cost = linear_cost();
    // The tree's drafts: never kept (bad), or the first 3 of 4 kept (good).
    const DraftLengthController tree = source(4, 0, 300, 0.0);
    const DraftLengthController tree_good = source(4, 3, 300, 0.0);
    const DraftLengthController model_cheap = source(4, 4, 300, 0.1);
    const DraftLengthController model_dear = source(4, 4, 300, 20.0);
    const DraftOption free_bad = draft_option(tree, 4, cost);
    const DraftOption free_good = draft_option(tree_good, 4, cost);
    // E ~ 1.0x over 12 ms for the bad tree; E ~ 5 over ~12.4 ms for the cheap model: model.
    const DraftOption cheap = best_draft_option(model_cheap, 8, cost);
    EXPECT_GT(cheap.n, 4);  // all-accepting and nearly free: the longest draft pays best
    EXPECT_FALSE(prefer_free(free_bad, cheap));
    // A model step costing 2 passes: even the best length loses to a tree draft kept 3 of 4.
    const DraftOption dear = best_draft_option(model_dear, 8, cost);
    EXPECT_EQ(dear.n, 1);  // each extra token costs more than it is expected to bring
    EXPECT_TRUE(prefer_free(free_good, dear));
    // ... and to a bad tree draft too (free beats two passes' worth of drafting).
    EXPECT_TRUE(prefer_free(free_bad, dear));
    // A model nearly free and always right beats even the good tree at the same length (E ~ 5
    // over 12.4 ms against E ~ 4 over 12 ms).
    EXPECT_FALSE(prefer_free(free_good, draft_option(model_cheap, 4, cost)));
}

TEST(DraftSource, ChooserFollowsTheRatesAndExplores) {
    const PassCost cost = linear_cost();
    DraftSourceParams p;
    p.explore_every = 4;
    DraftSourceChooser ch(p);
    StepRecord tree_step, model_step;
    tree_step.n_drafted = 4;  // the tree's drafts all rejected
    model_step.n_drafted = 4, model_step.n_accepted = 4;
    model_step.n_draft_steps = 4, model_step.draft_ms = 0.4;  // 0.1 ms a step
    for (int i = 0; i < 50; ++i) {
        ch.observe(DraftSource::free, tree_step);
        ch.observe(DraftSource::model, model_step);
    }
    // No tree draft: the model, at its best length within n_max.
    auto c = ch.choose(0, 6, cost);
    EXPECT_EQ(c.source, DraftSource::model);
    EXPECT_EQ(c.n, 6);
    // Both offered: the model wins, every 4th choice (the 4th and 8th so far) explores the tree.
    std::vector<DraftSource> got;
    for (int i = 0; i < 8; ++i) got.push_back(ch.choose(3, 6, cost).source);
    const std::vector<DraftSource> want = {
        DraftSource::model, DraftSource::model, DraftSource::free, DraftSource::model,
        DraftSource::model, DraftSource::model, DraftSource::free, DraftSource::model};
    EXPECT_EQ(got, want);
    EXPECT_EQ(ch.n_free(), 2);
    EXPECT_EQ(ch.n_model(), 7);
    // The tree starts being accepted and the model turns dear: the tree wins.
    tree_step.n_accepted = 3;
    model_step.draft_ms = 4 * 30.0;
    for (int i = 0; i < 400; ++i) {
        ch.observe(DraftSource::free, tree_step);
        ch.observe(DraftSource::model, model_step);
    }
    EXPECT_EQ(ch.choose(3, 6, cost).source, DraftSource::free);
    EXPECT_EQ(ch.choose(0, 0, cost).source, DraftSource::none);  // nothing to draft
}

TEST(DraftSource, PlainPassWhenNeitherSourcePays) {
    const PassCost cost = linear_cost();
    DraftSourceParams p;
    p.explore_every = 4;
    DraftSourceChooser ch(p);
    StepRecord tree_step, model_step;
    tree_step.n_drafted = 3;  // never accepted: E(3) ~ 1 over an 11.5 ms pass, < 1 / 10 ms
    model_step.n_drafted = 1, model_step.n_accepted = 1;
    model_step.n_draft_steps = 1, model_step.draft_ms = 20;  // 2 / 30.5 ms at best
    for (int i = 0; i < 300; ++i) {
        ch.observe(DraftSource::free, tree_step);
        ch.observe(DraftSource::model, model_step);
    }
    std::vector<DraftSource> got;
    for (int i = 0; i < 4; ++i) got.push_back(ch.choose(3, 6, cost).source);
    // Plain passes; the 4th choice explores the tree (free to try).
    EXPECT_EQ(got, (std::vector<DraftSource>{DraftSource::none, DraftSource::none,
                                             DraftSource::none, DraftSource::free}));
    EXPECT_EQ(ch.n_plain(), 3);
    // Without a tree draft the exploring choice is the model's.
    for (int i = 0; i < 3; ++i) EXPECT_EQ(ch.choose(0, 6, cost).source, DraftSource::none);
    EXPECT_EQ(ch.choose(0, 6, cost).source, DraftSource::model);
}

TEST(DraftSource, GreedyWithTheChoiceOnEqualsPlain) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    auto draft = Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
    SessionParams sp1;
    sp1.n_threads = 1;
    Session session(*target, sp1);
    const std::vector<token_id> prompt = target->tokenizer().encode(
        "Lily had a red ball. She liked the red ball. Lily had a red", true, false);
    SamplingParams sp;
    sp.temp = 0.f;
    Sampler sampler(sp);
    GenParams gp;
    gp.n_predict = 96;
    gp.ignore_eos = true;
    const std::vector<token_id> plain = generate_tokens(session, sampler, nullptr, prompt, gp);
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling.temp = 0.f;
    SuffixParams p;
    p.min_match = 2;
    SuffixDrafter drafter(p, nullptr, std::make_unique<DraftModelDrafter>(*draft, dp));
    DraftLengthController auto_length;
    Generator gen(session, sampler, &drafter, gp, &auto_length);
    const SpecStats st = gen.generate(prompt);
    EXPECT_EQ(gen.output(), plain);
    EXPECT_EQ(st.drafter, "suffix+draft-model");
    // The choice by cost ran (after the first measured pass) and picked each source.
    const DraftSourceChooser& ch = drafter.chooser();
    std::printf("draft source: tree %ld, model %ld, plain %ld steps; accepted %ld of %ld\n",
                ch.n_free(), ch.n_model(), ch.n_plain(), st.n_accepted, st.n_drafted);
    EXPECT_GT(ch.n_free() + ch.n_model() + ch.n_plain(), 10);
    EXPECT_GT(ch.n_free(), 0);
    EXPECT_GT(ch.n_model(), 0);
    EXPECT_GT(st.n_accepted, 0);
}
