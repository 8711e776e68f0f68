// Shared prompt prefixes (server/serving/prefix_blocks.h) through the scheduler, without HTTP:
// 8 concurrent greedy requests whose prompts share a long prefix (a system prompt) evaluate it
// once (one request builds the block, the other seven read it: their prompt tokens not evaluated
// are exactly the shared prefix), each output equals generating it alone with its own cache, a
// later request joins the same block, the KV pool counts the block's rows once, and with sharing
// off every request evaluates its whole prompt.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/serving/prefix_blocks.h"
#include "server/serving/scheduler.h"
#include "speculative/generator.h"
#include "speculative/make_drafter.h"
#include "test_util.h"

namespace {

using namespace specula;

constexpr int kCtx = 512;

const Runtime& models() {
    static const Runtime m = [] {
        Runtime r;
        r.target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
        SpeculativeConfig c;
        c.method = SpecMethod::draft_model;
        c.draft_model = test::shared_path("models/tinystories/llama2xs.gguf");
        c.n_draft = 4;
        r.speculative = load_speculative(c, *r.target);
        return r;
    }();
    return m;
}

GenParams gen_params() {
    GenParams g;
    g.n_predict = 12;
    g.n_draft = 4;
    return g;
}

const SamplingParams kGreedy{0.f, 0, 1.f, 0.f, 0};

// The shared prefix (a "system prompt" of ~190 tokens) and each request's own question.
std::vector<token_id> prompt(int i) {
    std::string sys;
    for (int k = 0; k < 6; ++k)
        sys +=
            "Once upon a time there was a little girl named Lily. She liked to play in the "
            "park with her dog. ";
    const char* own[] = {"One day",  "The dog", "Lily saw",  "Then a bird",
                         "Mom said", "It was",  "A big cat", "They ran"};
    return models().target->tokenizer().encode(sys + own[i % 8], true, true);
}

std::vector<token_id> alone(const std::vector<token_id>& p) {
    SessionParams sp;
    sp.n_ctx = kCtx;
    sp.n_threads = 2;
    Session s(*models().target, sp);
    Sampler sampler(kGreedy);
    DrafterParams dp;
    dp.n_ctx = kCtx;
    dp.n_threads = 2;
    dp.sampling = kGreedy;
    auto drafter = make_drafter(models().speculative, dp);
    return generate_tokens(s, sampler, drafter.get(), p, gen_params());
}

std::string text_of(const std::vector<token_id>& ids) {
    std::string s;
    for (token_id id : ids) s += models().target->tokenizer().token_to_piece(id, false);
    return s;
}

std::shared_ptr<Job> submit(Scheduler& sched, const std::vector<token_id>& p) {
    auto j = std::make_shared<Job>();
    j->prompt = p;
    j->gen = gen_params();
    j->sampling = kGreedy;
    j->t_arrival = std::chrono::steady_clock::now();
    sched.submit(j);
    return j;
}

std::string wait_text(Job& j) {
    std::unique_lock lock(j.mu);
    j.cv.wait(lock, [&] { return j.done; });
    EXPECT_TRUE(j.error.empty()) << j.error;
    std::string s;
    for (const auto& piece : j.pieces) s += piece.text;
    return s;
}

int common(const std::vector<token_id>& a, const std::vector<token_id>& b) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    return int(i);
}

SchedulerConfig config(int prefix_min_tokens) {
    SchedulerConfig c;
    c.n_slots = 8;
    c.n_ctx = kCtx;
    c.n_threads = 2;
    c.prefill_chunk = 64;  // the prefix takes several steps: the others arrive while it is built
    c.kv_pool = 4 * kCtx;  // smaller than 8 whole caches: 4 KiB pages, the pool counts rows
    c.prefix_min_tokens = prefix_min_tokens;
    return c;
}

}  // namespace

TEST(PrefixSharing, ConcurrentRequestsEvaluateTheSharedPrefixOnce) {
    const int shared = common(prompt(0), prompt(1));
    ASSERT_GT(shared, 150);
    Scheduler sched(models(), config(32));
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < 8; ++i) jobs.push_back(submit(sched, prompt(i)));
    int builders = 0;
    long evaluated = 0, prompt_tokens = 0;
    for (int i = 0; i < 8; ++i) {
        const std::string got = wait_text(*jobs[size_t(i)]);
        EXPECT_EQ(got, text_of(alone(prompt(i)))) << "request " << i;
        const int cached = jobs[size_t(i)]->n_cached;
        EXPECT_TRUE(cached == 0 || cached == shared) << "request " << i << ": " << cached;
        builders += cached == 0;
        evaluated += long(prompt(i).size()) - cached;
        prompt_tokens += long(prompt(i).size());
    }
    EXPECT_EQ(builders, 1);  // the prefix was evaluated once
    EXPECT_EQ(evaluated, prompt_tokens - 7L * shared);
    // The block holds the builder's prompt (all but its last token) once; every slot reads it.
    KvPoolGauges g = sched.pool_state();
    EXPECT_TRUE(g.prefixes);
    EXPECT_EQ(g.shared_blocks, 1);
    EXPECT_GE(g.shared, shared);
    EXPECT_LT(g.shared, shared + 8);
    EXPECT_EQ(g.shared_readers, 8);
    EXPECT_EQ(g.used, 0);
    // /metrics shows them (server/serving/metrics.h).
    Metrics metrics;
    metrics.set_kv_pool([&] { return sched.pool_state(); });
    const std::string text = metrics.render();
    metrics.set_kv_pool({});
    EXPECT_NE(text.find("\nspecula:prefix_shared_positions " + std::to_string(g.shared) + "\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("\nspecula:prefix_blocks 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nspecula:prefix_block_readers 8\n"), std::string::npos) << text;
    // Idle: the block once plus each slot's own rows (its question and answer), not 8 prefixes.
    EXPECT_LT(g.cached, g.shared + 8 * 40);
    // A later request with the same prefix reads the block too.
    auto later = submit(sched, prompt(3));
    EXPECT_EQ(wait_text(*later), text_of(alone(prompt(3))));
    EXPECT_GE(later->n_cached, shared);
}

TEST(PrefixSharing, OffEveryRequestEvaluatesItsPrompt) {
    Scheduler sched(models(), config(0));
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < 3; ++i) jobs.push_back(submit(sched, prompt(i)));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(wait_text(*jobs[size_t(i)]), text_of(alone(prompt(i)))) << "request " << i;
        EXPECT_EQ(jobs[size_t(i)]->n_cached, 0) << "request " << i;
    }
    EXPECT_FALSE(sched.pool_state().prefixes);
    EXPECT_EQ(sched.pool_state().shared_blocks, 0);
}

TEST(PrefixSharing, ACancelledBuilderLeavesTheOthersCorrect) {
    SchedulerConfig c = config(32);
    c.prefill_chunk = 16;  // the builder takes ~12 steps over the prefix
    Scheduler sched(models(), c);
    auto builder = submit(sched, prompt(0));
    {
        std::unique_lock lock(builder->mu);
        builder->cv.wait(lock, [&] { return builder->started || builder->done; });
    }
    auto joiner = submit(sched, prompt(1));
    builder->cancel = true;  // mid-prompt, most likely: the joiner reads what was written
    EXPECT_EQ(wait_text(*joiner), text_of(alone(prompt(1))));
    {
        std::unique_lock lock(builder->mu);
        builder->cv.wait(lock, [&] { return builder->done; });
    }
    auto later = submit(sched, prompt(2));
    EXPECT_EQ(wait_text(*later), text_of(alone(prompt(2))));
    EXPECT_EQ(sched.pool_state().used, 0);
}

// The plan alone (no model): join what a block holds, wait for what is still being built or
// admitted in the same round, build when nothing shares enough; room is made only by dropping a
// block nothing reads and no admitted request keeps.
TEST(PrefixSharing, PlansJoinWaitBuildAndRoom) {
    PrefixBlocks blocks(4, 2);
    const std::vector<token_id> sys = {1, 10, 11, 12, 13, 14, 15, 16, 17};
    auto kv = std::make_shared<KVCache>(1, 64, 32);
    const Session* builder = reinterpret_cast<const Session*>(&sys);  // identity only
    PrefixBlock* b = blocks.add(kv, nullptr, sys, builder, 1);
    std::vector<token_id> p = {1, 10, 11, 12, 13, 14, 15, 99};
    EXPECT_EQ(blocks.plan(p, 0, {}).kind, PrefixPlan::wait);  // nothing written yet
    std::vector<float> row(32, 0.5f);
    for (int i = 0; i < 7; ++i) kv->write(0, i, row.data(), row.data());
    kv->append(std::span(sys).first(7));
    PrefixPlan plan = blocks.plan(p, 0, {});
    EXPECT_EQ(plan.kind, PrefixPlan::join);
    EXPECT_EQ(plan.block, b);
    EXPECT_EQ(plan.n, 7);
    EXPECT_EQ(blocks.plan(p, 7, {}).kind, PrefixPlan::none);  // its slot holds as much
    const std::vector<token_id> other = {1, 50, 51, 52, 53, 54};
    EXPECT_EQ(blocks.plan(other, 0, {}).kind, PrefixPlan::build);
    const std::vector<std::vector<token_id>> starting = {{1, 50, 51, 52, 53, 60}};
    EXPECT_EQ(blocks.plan(other, 0, starting).kind, PrefixPlan::wait);
    EXPECT_EQ(blocks.plan(std::vector<token_id>{1, 50}, 0, {}).kind, PrefixPlan::none);
    blocks.built(builder);
    EXPECT_EQ(b->rows(), 7);
    blocks.add(std::make_shared<KVCache>(1, 64, 32), nullptr, other, nullptr, 2);
    // `kv`, held here, stands for a session reading the first block.
    const PrefixBlock* none[] = {nullptr};
    const PrefixBlock* second[] = {blocks.blocks()[1].get()};
    EXPECT_FALSE(blocks.make_room(second));  // the first is read, the second kept
    EXPECT_TRUE(blocks.make_room(none));     // the second goes
    ASSERT_EQ(blocks.blocks().size(), 1u);
    EXPECT_EQ(blocks.blocks()[0].get(), b);
    EXPECT_EQ(b->readers(), 1);
}
