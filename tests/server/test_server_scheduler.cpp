// Scheduler (server/serving/scheduler.h) without HTTP: concurrent greedy requests with a draft
// model share batched passes and each gets exactly the tokens of generating it alone (what `specula
// run` does); more requests than slots queue and join between steps; a long prompt is prefilled in
// chunks while a short one already streams; the draft model drafts for several slots per pass; a
// prompt that starts with what a slot holds reuses it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/serving/scheduler.h"
#include "speculative/generator.h"
#include "speculative/make_drafter.h"
#include "test_util.h"

namespace {

using namespace specula;

constexpr int kCtx = 512;

// The runtime the scheduler runs over (runtime/runtime.h), filled by hand: no plan, no session.
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

std::vector<token_id> tokens(const std::string& text) {
    return models().target->tokenizer().encode(text, true, true);
}

std::string text_of(const std::vector<token_id>& ids) {
    std::string s;
    for (token_id id : ids) s += models().target->tokenizer().token_to_piece(id, false);
    return s;
}

GenParams gen_params(int n_predict) {
    GenParams g;
    g.n_predict = n_predict;
    g.n_draft = 4;
    return g;
}

// The reference: the same generation alone, as `specula run --temp 0 -md DRAFT --draft 4` runs it.
std::vector<token_id> alone(const std::vector<token_id>& prompt, int n_predict) {
    Session s(*models().target, SessionParams{kCtx, 2});
    const SamplingParams greedy{0.f, 0, 1.f, 0.f, 0};
    Sampler sampler(greedy);
    auto drafter = make_drafter(models().speculative, DrafterParams{kCtx, 2, greedy});
    return generate_tokens(s, sampler, drafter.get(), prompt, gen_params(n_predict));
}

std::shared_ptr<Job> submit(Scheduler& sched, const std::vector<token_id>& prompt, int n_predict) {
    auto j = std::make_shared<Job>();
    j->prompt = prompt;
    j->gen = gen_params(n_predict);
    j->sampling = SamplingParams{0.f, 0, 1.f, 0.f, 0};
    j->t_arrival = std::chrono::steady_clock::now();
    sched.submit(j);
    return j;
}

std::string wait_text(Job& j) {
    std::unique_lock lock(j.mu);
    j.cv.wait(lock, [&] { return j.done; });
    EXPECT_TRUE(j.error.empty()) << j.error;
    std::string s;
    for (const auto& p : j.pieces) s += p.text;
    return s;
}

const std::vector<std::string> kPrompts = {
    "Lily saw a big red",
    "Once upon a time, a cat",
    "The little dog",
    "Tom had a ball. He liked to throw it high in the sky and catch it. One day the ball went",
    "The sun was",
    "A bird sang",
    "Sue and Ben went to the park. They saw a big slide and a swing. Sue wanted to go on the "
    "swing first, but Ben",
    "Mom said",
};

SchedulerConfig config(int n_slots, int prefill_chunk) {
    SchedulerConfig c;
    c.n_slots = n_slots;
    c.n_ctx = kCtx;
    c.n_threads = 2;
    c.prefill_chunk = prefill_chunk;
    return c;
}

void expect_each_as_alone(int n_slots, int n_requests, int prefill_chunk) {
    Scheduler sched(models(), config(n_slots, prefill_chunk));
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < n_requests; ++i)
        jobs.push_back(submit(sched, tokens(kPrompts[size_t(i) % kPrompts.size()]), 24 + i));
    for (int i = 0; i < n_requests; ++i) {
        const std::string got = wait_text(*jobs[size_t(i)]);
        const auto ref = alone(tokens(kPrompts[size_t(i) % kPrompts.size()]), 24 + i);
        EXPECT_EQ(got, text_of(ref)) << "request " << i;
        EXPECT_EQ(jobs[size_t(i)]->stats.n_generated, int(ref.size())) << "request " << i;
        EXPECT_GT(jobs[size_t(i)]->stats.n_drafted, 0) << "request " << i;
    }
    // The draft model ran batched across the slots: its passes drafted for several slots each.
    EXPECT_GT(sched.draft_passes(), 0);
    if (n_slots > 1) {
        EXPECT_GT(sched.draft_sequences(), sched.draft_passes() * 3 / 2);
    }
}

TEST(Scheduler, EightConcurrentGreedyRequestsEqualEachAlone) {
    expect_each_as_alone(8, 8, 16);
}

TEST(Scheduler, MoreRequestsThanSlotsQueueAndJoinBetweenSteps) {
    expect_each_as_alone(3, 10, 5);
}

TEST(Scheduler, LongPromptIsPrefilledInChunksWhileOthersStream) {
    std::string long_text;
    for (int i = 0; i < 12; ++i) long_text += " The cat sat on the mat and looked at the big tree.";
    const auto long_prompt = tokens(long_text);
    ASSERT_GT(long_prompt.size(), 120u);
    SchedulerConfig c = config(2, 8);
    c.prefill_chunk_idle = 8;  // the first step too (nothing decodes yet)
    Scheduler sched(models(), c);
    auto a = submit(sched, long_prompt, 8);
    auto b = submit(sched, tokens("The little dog"), 40);
    const std::string ta = wait_text(*a), tb = wait_text(*b);
    EXPECT_EQ(ta, text_of(alone(long_prompt, 8)));
    EXPECT_EQ(tb, text_of(alone(tokens("The little dog"), 40)));
    // 8 prompt tokens a step: the long prompt needs 15+ steps before its first token, the short
    // one streams from its second step on.
    EXPECT_LT(b->ttft_s, a->ttft_s);
    EXPECT_GT(a->stats.t_prompt_ms, 0);
}

// With nothing decoding, a step's prompt chunk is the idle one (-ub): a lone long prompt takes
// one pass, not one per 8 tokens (while a slot decodes it is 8: the test above).
TEST(Scheduler, ALonePromptIsPrefilledInOnePass) {
    std::string long_text;
    for (int i = 0; i < 12; ++i) long_text += " The cat sat on the mat and looked at the big tree.";
    const auto long_prompt = tokens(long_text);
    ASSERT_GT(long_prompt.size(), 120u);
    Metrics metrics;
    SchedulerConfig c = config(2, 8);
    c.metrics = &metrics;
    Scheduler sched(models(), c);
    auto a = submit(sched, long_prompt, 1);
    EXPECT_EQ(wait_text(*a), text_of(alone(long_prompt, 1)));
    // The prompt's pass, then the pass that gives its first token (its last prompt token and
    // drafts): 16 passes and more with 8 prompt tokens a step.
    const std::string m = metrics.render();
    const std::string key = "\nspecula:batch_passes_total ";
    const size_t at = m.find(key);
    ASSERT_NE(at, std::string::npos) << m;
    EXPECT_EQ(std::stod(m.substr(at + key.size())), 2) << m;
}

TEST(Scheduler, PromptStartingWithASlotsTokensReusesThem) {
    Scheduler sched(models(), config(1, 64));
    const auto p1 = tokens("Lily saw a big red");
    auto a = submit(sched, p1, 12);
    wait_text(*a);
    EXPECT_EQ(a->n_cached, 0);
    // The next turn: the first prompt, its answer and more text. The slot holds the first prompt
    // and all of the answer but its last token.
    auto p2 = p1;
    const auto out1 = alone(p1, 12);
    p2.insert(p2.end(), out1.begin(), out1.end());
    const auto more = models().target->tokenizer().encode(" Then she went home.", false, false);
    p2.insert(p2.end(), more.begin(), more.end());
    auto b = submit(sched, p2, 16);
    const std::string tb = wait_text(*b);
    EXPECT_EQ(b->n_cached, int(p1.size() + out1.size()) - 1);
    EXPECT_EQ(tb, text_of(alone(p2, 16)));
    // A different prompt reuses only what it shares (BOS at least).
    auto c = submit(sched, tokens("Mom said"), 8);
    const std::string tc = wait_text(*c);
    EXPECT_GE(c->n_cached, 1);
    EXPECT_LT(c->n_cached, 3);
    EXPECT_EQ(tc, text_of(alone(tokens("Mom said"), 8)));
}

// Two conversations, two slots: the second one's first turn shares only BOS with the first's
// cache, so it takes the empty slot instead of overwriting that cache, and the first
// conversation's next turn still finds all of it.
TEST(Scheduler, ANewConversationTakesAnEmptySlotNotAnotherConversationsCache) {
    Scheduler sched(models(), config(2, 64));
    const auto p1 = tokens("Lily saw a big red");
    auto a = submit(sched, p1, 12);
    wait_text(*a);
    auto b = submit(sched, tokens("Mom said"), 8);
    wait_text(*b);
    EXPECT_NE(b->slot_id, a->slot_id);
    EXPECT_EQ(b->n_cached, 0);  // the empty slot
    auto p2 = p1;
    const auto out1 = alone(p1, 12);
    p2.insert(p2.end(), out1.begin(), out1.end());
    const auto more = models().target->tokenizer().encode(" Then she went home.", false, false);
    p2.insert(p2.end(), more.begin(), more.end());
    auto c = submit(sched, p2, 8);
    EXPECT_EQ(wait_text(*c), text_of(alone(p2, 8)));
    EXPECT_EQ(c->slot_id, a->slot_id);
    EXPECT_EQ(c->n_cached, int(p1.size() + out1.size()) - 1);
    // With both slots holding other conversations, a third takes the least recently used (b's).
    auto d = submit(sched, tokens("The sun was"), 4);
    wait_text(*d);
    EXPECT_EQ(d->slot_id, b->slot_id);
}

TEST(Scheduler, ACancelledRequestLeavesItsSlotAndTheQueue) {
    Scheduler sched(models(), config(1, 64));
    auto a = submit(sched, tokens("Lily saw a big red"), 400);
    auto b = submit(sched, tokens("Mom said"), 400);  // waits: one slot
    {
        std::unique_lock lock(a->mu);
        a->cv.wait(lock, [&] { return !a->pieces.empty(); });
    }
    b->cancel = true;
    wait_text(*b);
    EXPECT_FALSE(b->started);
    a->cancel = true;
    wait_text(*a);
    EXPECT_EQ(a->stats.stop_reason, "callback");
    EXPECT_LT(a->stats.n_generated, 400);
    // The slot serves the next request as if alone.
    auto c = submit(sched, tokens("The sun was"), 20);
    EXPECT_EQ(wait_text(*c), text_of(alone(tokens("The sun was"), 20)));
}

}  // namespace
