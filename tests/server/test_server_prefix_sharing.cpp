// Shared prompt prefixes (server/serving/prefix_blocks.h) through the scheduler, without HTTP:
// 8 concurrent greedy requests whose prompts share a long prefix (a system prompt) evaluate it
// once (one request builds the block, the other seven read it: their prompt tokens not evaluated
// are exactly the shared prefix), each output equals generating it alone with its own cache, a
// later request joins the same block, the KV pool counts the block's rows once, and with sharing
// off every request evaluates its whole prompt. Partial prefixes: requests that share only the
// first rows of a longer block read those rows in place; a later turn that holds a whole block
// and more extends it (its new rows evaluated once, whatever arrives beside it); requests that
// share part of a block and a long tail with each other branch one copy of the shared rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "server/serving/prefix_blocks.h"
#include "server/serving/prompt_cache.h"
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

std::string system_prompt() {
    std::string sys;
    for (int k = 0; k < 6; ++k)
        sys +=
            "Once upon a time there was a little girl named Lily. She liked to play in the "
            "park with her dog. ";
    return sys;
}

const char* const kOwn[] = {"One day",  "The dog", "Lily saw",  "Then a bird",
                            "Mom said", "It was",  "A big cat", "They ran"};

std::vector<token_id> encode(const std::string& text) {
    return models().target->tokenizer().encode(text, true, true);
}

// The shared prefix (a "system prompt" of ~190 tokens) and each request's own question.
std::vector<token_id> prompt(int i) {
    return encode(system_prompt() + kOwn[i % 8]);
}

// A second part (~60 tokens: "tools", or the next turn of a conversation) after `head`, then a
// question of its own.
std::vector<token_id> with_tail(const std::string& head, int i) {
    return encode(head +
                  " The sun was warm and the birds sang in the tall green trees near the "
                  "river. Tom had a red ball and a small boat. " +
                  kOwn[i % 8]);
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

// Partial prefix: a block built by a prompt with a long part of its own (~60 tokens past the
// system prompt); requests sharing only the system prompt read the block's first rows in place
// (the one that takes the builder's slot through that slot, the other by joining the block):
// no new block, no row evaluated twice, outputs as if each ran alone.
TEST(PrefixSharing, APartOfABlockIsReadInPlace) {
    const std::vector<token_id> first = with_tail(system_prompt(), 0);
    const int shared = common(first, prompt(1));
    ASSERT_GE(shared, 150);
    ASSERT_GE(int(first.size()) - shared, 50);  // the block holds much more than they share
    Scheduler sched(models(), config(32));
    auto a = submit(sched, first);
    EXPECT_EQ(wait_text(*a), text_of(alone(first)));
    EXPECT_EQ(a->n_cached, 0);
    auto b = submit(sched, prompt(1));
    auto c = submit(sched, prompt(2));
    EXPECT_EQ(wait_text(*b), text_of(alone(prompt(1))));
    EXPECT_EQ(wait_text(*c), text_of(alone(prompt(2))));
    EXPECT_EQ(b->n_cached, shared);
    EXPECT_EQ(c->n_cached, shared);
    KvPoolGauges g = sched.pool_state();
    EXPECT_EQ(g.shared_blocks, 1);  // the builder's, read by all three
    EXPECT_EQ(g.shared, int64_t(first.size()) - 1);
}

// A later turn (the whole first prompt, then ~60 tokens more) extends the first prompt's block
// instead of evaluating its new part once per request: of three such requests at once, one
// evaluates it (into the block), another reads it, and the one on the first request's slot, which
// holds more than the block, keeps its own rows.
TEST(PrefixSharing, ALaterTurnExtendsTheBlock) {
    const std::string head = system_prompt() + kOwn[0];
    const std::vector<token_id> first = encode(head);
    Scheduler sched(models(), config(32));
    auto a = submit(sched, first);
    EXPECT_EQ(wait_text(*a), text_of(alone(first)));
    std::vector<std::shared_ptr<Job>> jobs;
    const int own[] = {1, 2, 4};  // questions with different first tokens
    for (int i : own) jobs.push_back(submit(sched, with_tail(head, i)));
    const int block = int(first.size()) - 1;  // the first prompt's block
    ASSERT_EQ(common(first, with_tail(head, 1)), int(first.size()));
    const int tail = common(with_tail(head, 1), with_tail(head, 2));
    ASSERT_EQ(common(with_tail(head, 1), with_tail(head, 4)), tail);
    ASSERT_GE(tail, block + 50);
    int extenders = 0;
    for (int k = 0; k < 3; ++k) {
        Job& j = *jobs[size_t(k)];
        const int i = own[k];
        EXPECT_EQ(wait_text(j), text_of(alone(with_tail(head, i)))) << "request " << i;
        // The block's rows (its extender), the extended block's, or (the request that lands on
        // the first request's slot) that slot's own rows, which are more than the block's.
        EXPECT_GE(j.n_cached, block) << i;
        extenders += j.n_cached == block;
    }
    EXPECT_EQ(extenders, 1);                         // the new part was evaluated once
    EXPECT_EQ(sched.pool_state().shared_blocks, 1);  // the first block, longer
    EXPECT_GE(sched.pool_state().shared, tail);
}

// Requests sharing part of a block (the system prompt) and a long part with each other (the same
// "tools", not the block's) queue while the slots are busy: the first branches a block (a copy of
// the system prompt's rows, then the tools evaluated once), the others read that block.
TEST(PrefixSharing, QueuedRequestsSharingPartOfABlockBranchIt) {
    SchedulerConfig cfg = config(32);
    cfg.n_slots = 2;
    Scheduler sched(models(), cfg);
    const std::vector<token_id> first = prompt(0);
    auto a = submit(sched, first);
    EXPECT_EQ(wait_text(*a), text_of(alone(first)));
    // Two unrelated requests hold both slots while the three arrive.
    std::vector<std::shared_ptr<Job>> busy;
    for (const char* p : {"Sam", "Ben"}) {
        auto j = std::make_shared<Job>();
        j->prompt = encode(p);
        j->gen = gen_params();
        j->gen.n_predict = 96;
        j->sampling = kGreedy;
        j->t_arrival = std::chrono::steady_clock::now();
        sched.submit(j);
        busy.push_back(j);
    }
    const std::string tools = system_prompt() + "Tools:";
    std::vector<std::shared_ptr<Job>> jobs;
    const int own[] = {1, 2, 4};  // questions with different first tokens
    for (int i : own) jobs.push_back(submit(sched, with_tail(tools, i)));
    const int sys = common(first, with_tail(tools, 1));
    const int tail = common(with_tail(tools, 1), with_tail(tools, 2));
    ASSERT_EQ(common(with_tail(tools, 1), with_tail(tools, 4)), tail);
    ASSERT_GE(tail, sys + 50);
    int branches = 0;
    for (int k = 0; k < 3; ++k) {
        Job& j = *jobs[size_t(k)];
        const int i = own[k];
        EXPECT_EQ(wait_text(j), text_of(alone(with_tail(tools, i)))) << "request " << i;
        EXPECT_TRUE(j.n_cached == sys || j.n_cached == tail) << i << ": " << j.n_cached;
        branches += j.n_cached == sys;
    }
    for (auto& j : busy) wait_text(*j);
    EXPECT_EQ(branches, 1);  // the tools were evaluated once, the system prompt not again
    EXPECT_EQ(sched.pool_state().shared_blocks, 2);
}

// --cache-ram feeds the blocks: a prompt whose prefix is in the RAM prompt cache (its block was
// dropped) builds its block from the cached rows (not evaluated again), and requests after it
// that share that prefix read the block, on whichever slot.
TEST(PrefixSharing, ThePromptCacheFeedsABlock) {
    PromptCache ram(64u << 20);
    SchedulerConfig cfg = config(32);
    cfg.n_slots = 2;  // at most 2 blocks
    cfg.prompt_cache = &ram;
    Scheduler sched(models(), cfg);
    const auto run = [&](const std::vector<token_id>& p) {
        auto j = submit(sched, p);
        EXPECT_EQ(wait_text(*j), text_of(alone(p)));
        return j->n_cached;
    };
    const auto other = [](const char* s) { return encode(std::string(s) + s + s); };
    EXPECT_EQ(run(prompt(0)), 0);  // its block; then three others push it out (to RAM)
    run(other("Tom had a big red ball and he liked to throw it. "));
    run(other("The sun was hot and the sky was blue all day. "));
    run(other("A small frog sat on a green leaf by the pond. "));
    const int sys = common(prompt(0), prompt(1));
    // The three others' blocks hold fewer rows than the system prompt.
    ASSERT_LT(sched.pool_state().shared, sys);
    EXPECT_EQ(run(prompt(1)), sys);  // from RAM, into a block
    EXPECT_EQ(ram.stats().hits, 1);
    EXPECT_GE(sched.pool_state().shared, sys);  // a block holds it now
    EXPECT_EQ(sched.pool_state().shared_blocks, 2);
    // Two at once: one on the slot that holds it, the other reads the block in place (not a copy
    // of the first one's rows from RAM, which the first one's start put there).
    auto c = submit(sched, prompt(2));
    auto d = submit(sched, prompt(4));
    EXPECT_EQ(wait_text(*c), text_of(alone(prompt(2))));
    EXPECT_EQ(wait_text(*d), text_of(alone(prompt(4))));
    EXPECT_EQ(c->n_cached, common(prompt(2), prompt(1)));
    EXPECT_EQ(d->n_cached, common(prompt(4), prompt(1)));
    EXPECT_GE(std::min(c->n_cached, d->n_cached), sys);
    EXPECT_EQ(ram.stats().hits, 1);
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

// Extend: a prompt holding all of an idle block's rows and min_tokens more (on a slot holding
// less than min_tokens past them); not while a builder writes it. Branch: a prompt sharing part
// of a block, and min_tokens more with another queued prompt (not with itself).
TEST(PrefixSharing, PlansExtendAndBranch) {
    PrefixBlocks blocks(4, 4);
    const std::vector<token_id> sys = {1, 10, 11, 12, 13, 14};
    auto kv = std::make_shared<KVCache>(1, 64, 32);
    std::vector<float> row(32, 0.5f);
    for (int i = 0; i < 6; ++i) kv->write(0, i, row.data(), row.data());
    kv->append(sys);
    const Session* builder = reinterpret_cast<const Session*>(&sys);  // identity only
    PrefixBlock* b = blocks.add(kv, nullptr, sys, nullptr, 1);
    const std::vector<token_id> longer = {1, 10, 11, 12, 13, 14, 20, 21, 22, 23, 24};
    PrefixPlan plan = blocks.plan(longer, 0, {});
    EXPECT_EQ(plan.kind, PrefixPlan::extend);
    EXPECT_EQ(plan.block, b);
    EXPECT_EQ(plan.n, 6);
    EXPECT_EQ(blocks.plan(longer, 6, {}).kind, PrefixPlan::extend);  // its slot holds the same
    // A slot holding rows past the block (its own conversation's last turn) keeps them: extending
    // would evaluate them again and shrink its cache hit to the block's.
    EXPECT_EQ(blocks.plan(longer, 7, {}).kind, PrefixPlan::none);
    EXPECT_EQ(blocks.plan(longer, 10, {}).kind, PrefixPlan::none);  // its slot holds them
    const std::vector<token_id> few = {1, 10, 11, 12, 13, 14, 20, 21};
    EXPECT_EQ(blocks.plan(few, 0, {}).kind, PrefixPlan::join);  // too little past it
    blocks.extend(b, longer, builder, 2);
    EXPECT_EQ(b->rows(), 11);
    EXPECT_EQ(blocks.plan(longer, 0, {}).kind, PrefixPlan::wait);  // not written yet
    EXPECT_EQ(blocks.plan(std::vector<token_id>(longer.begin(), longer.begin() + 6), 0, {}).kind,
              PrefixPlan::join);
    blocks.built(builder);  // nothing was written past 6: it holds those
    EXPECT_EQ(b->rows(), 6);
    // Branch: sharing 5 rows of 6 (one differs), then 4 more with another queued prompt.
    for (int i = 6; i < 9; ++i) kv->write(0, i, row.data(), row.data());
    kv->append(std::vector<token_id>{30, 31, 32});
    b->planned.assign(kv->tokens().begin(), kv->tokens().end());
    const std::vector<token_id> mine = {1, 10, 11, 12, 13, 40, 41, 42, 43, 44, 45};
    const std::vector<token_id> theirs = {1, 10, 11, 12, 13, 40, 41, 42, 43, 50};
    const std::span<const token_id> alone_q[] = {mine};
    const std::span<const token_id> both_q[] = {mine, theirs};
    EXPECT_EQ(blocks.plan(mine, 0, {}, alone_q).kind, PrefixPlan::join);
    plan = blocks.plan(mine, 0, {}, both_q);
    EXPECT_EQ(plan.kind, PrefixPlan::branch);
    EXPECT_EQ(plan.block, b);
    EXPECT_EQ(plan.n, 5);
}
