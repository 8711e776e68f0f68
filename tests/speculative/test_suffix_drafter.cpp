// Suffix decoding (speculative/drafters/suffix_drafter.h): the tree's counts and drafts on
// hand-made sequences (the most frequent continuation, the probability floor, the spec factor,
// removal back to nothing), the server-wide cache's eviction by count and memory and its refusal
// of a bound too small, naming the flag; vLLM's keys; and on stories260K greedy output equal to
// plain decoding, alone and combined with the llama2xs draft model, with a repeated request
// drafted from the earlier one's output (an agent loop), read from the draft trace.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/session.h"
#include "speculative/config.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/suffix_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

using namespace specula;

namespace {

using Seq = std::vector<token_id>;

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST(SuffixTree, DraftsTheMostFrequentContinuation) {
    SuffixTree t(8);
    t.add(Seq{1, 2, 3, 4, 9, 1, 2, 3, 4, 9, 1, 2, 3, 5});
    // After [1 2 3]: 4 twice, 5 once (and the run at the end has no continuation): 4 first.
    const SuffixLimits loose{1, 4.0f, 0.0f};
    SuffixMatch m = t.match(Seq{7, 1, 2, 3}, 4, loose);
    EXPECT_EQ(m.tokens, (Seq{4, 9, 1, 2}));
    EXPECT_EQ(m.match_len, 3);
    // [1 2 3] occurred 3 times, followed by 4 twice: p(4) = 2/3; then 9, 1, 2 surely.
    EXPECT_NEAR(m.score, 4 * 2.0 / 3, 1e-9);
    // Probability floor: 2/3 < 0.7 stops at once; the spec factor caps by the matched length.
    EXPECT_TRUE(t.match(Seq{1, 2, 3}, 4, {1, 4.0f, 0.7f}).tokens.empty());
    EXPECT_EQ(t.match(Seq{2, 3}, 8, {1, 1.0f, 0.0f}).tokens, (Seq{4, 9}));
    // min_match: a 2-token match does not draft under min_match 3; unknown runs draft nothing.
    EXPECT_TRUE(t.match(Seq{8, 2, 3}, 4, {3, 4.0f, 0.0f}).tokens.empty());
    EXPECT_TRUE(t.match(Seq{6, 6}, 4, loose).tokens.empty());
}

TEST(SuffixTree, RemoveUndoesAdd) {
    SuffixTree both(6), only_b(6);
    const Seq a = {5, 6, 7, 5, 6, 8, 1}, b = {5, 6, 9, 9, 2};
    both.add(a);
    const size_t n_a = both.n_nodes();
    EXPECT_GT(n_a, 0u);
    both.add(b);
    only_b.add(b);
    both.remove(a);
    EXPECT_EQ(both.n_nodes(), only_b.n_nodes());
    const SuffixLimits loose{1, 4.0f, 0.0f};
    EXPECT_EQ(both.match(Seq{5, 6}, 3, loose).tokens, (Seq{9, 9, 2}));
    both.remove(b);
    EXPECT_EQ(both.n_nodes(), 0u);
    // Token by token (a growing history) counts what add() counts.
    SuffixTree grown(6);
    SuffixTree::Appender app(grown);
    for (token_id x : a) app.push(x);
    grown.remove(a);
    EXPECT_EQ(grown.n_nodes(), 0u);
}

TEST(SuffixCache, EvictsByCountAndRefusesASmallBound) {
    SuffixParams p;
    p.min_match = 2;
    p.max_cached_requests = 2;
    SuffixCache cache(p);
    const SuffixLimits lim{2, 4.0f, 0.0f};
    cache.add_output(Seq{10, 11, 12, 13});
    EXPECT_EQ(cache.match(Seq{10, 11}, 2, lim).tokens, (Seq{12, 13}));
    cache.add_output(Seq{20, 21, 22});
    cache.add_output(Seq{30, 31, 32});
    EXPECT_EQ(cache.n_outputs(), 2);
    EXPECT_TRUE(cache.match(Seq{10, 11}, 2, lim).tokens.empty()) << "the oldest was evicted";
    EXPECT_EQ(cache.match(Seq{30, 31}, 2, lim).tokens, (Seq{32}));

    // Memory: a bound of the floor holds one long output and evicts the older ones for it.
    p.max_cached_requests = 100;
    p.cache_bytes = suffix_min_cache_bytes(p.max_depth);
    SuffixCache small(p);
    Seq long_out(static_cast<size_t>(kSuffixMinOutput));
    for (size_t i = 0; i < long_out.size(); ++i) long_out[i] = token_id(1000 + i);
    small.add_output(Seq{1, 2, 3});
    small.add_output(long_out);
    EXPECT_EQ(small.n_outputs(), 1);
    EXPECT_LE(small.bytes(), p.cache_bytes);

    p.cache_bytes = suffix_min_cache_bytes(p.max_depth) - 1;
    const std::string e = error_of([&] { SuffixCache c(p); });
    EXPECT_NE(e.find("--spec-suffix-cache-mb"), std::string::npos) << e;
    SpeculativeFlags f;
    f.spec_type = "suffix";
    f.suffix_cache_mb = 0.5;
    const std::string e2 = error_of([&] { parse_speculative_flags(f); });
    EXPECT_NE(e2.find("--spec-suffix-cache-mb 0.5 is too small"), std::string::npos) << e2;
}

TEST(SuffixConfig, FlagsAndVllmKeys) {
    SpeculativeFlags f;
    f.speculative_config = R"({"method": "suffix", "num_speculative_tokens": 6,
        "suffix_decoding_max_tree_depth": 32, "suffix_decoding_max_cached_requests": 7,
        "suffix_decoding_max_spec_factor": 2.0, "suffix_decoding_min_token_prob": 0.25})";
    const SpeculativeConfig c = parse_speculative_flags(f);
    EXPECT_EQ(c.method, SpecMethod::suffix);
    EXPECT_EQ(c.n_draft, 6);
    EXPECT_EQ(c.suffix.max_depth, 32);
    EXPECT_EQ(c.suffix.max_cached_requests, 7);
    EXPECT_FLOAT_EQ(c.suffix.max_spec_factor, 2.0f);
    EXPECT_FLOAT_EQ(c.suffix.min_token_prob, 0.25f);
    f.speculative_config = R"({"method": "ngram", "suffix_decoding_max_tree_depth": 32})";
    EXPECT_NE(error_of([&] { parse_speculative_flags(f); }).find("method \"suffix\" only"),
              std::string::npos);
    f.speculative_config = R"({"method": "suffix", "suffix_decoding_min_token_prob": 2})";
    EXPECT_NE(error_of([&] { parse_speculative_flags(f); }).find("suffix_decoding_min_token_prob"),
              std::string::npos);
    SpeculativeFlags g;
    g.spec_type = "suffix";
    g.suffix.min_match = 30;
    EXPECT_NE(error_of([&] { parse_speculative_flags(g); }).find("--spec-suffix-min-match 30"),
              std::string::npos);
}

namespace {

SessionParams one_thread() {
    SessionParams p;
    p.n_threads = 1;
    return p;
}
const SessionParams kOneThread = one_thread();

std::vector<token_id> greedy(Session& target, Drafter* d, const Seq& prompt, int n_draft,
                             SpecStats* st = nullptr) {
    SamplingParams sp;
    sp.temp = 0.f;
    Sampler sampler(sp);
    GenParams gp;
    gp.n_predict = 96;
    gp.ignore_eos = true;
    gp.n_draft = n_draft;
    gp.trace = true;
    return generate_tokens(target, sampler, d, prompt, gp, st);
}

}  // namespace

TEST(SuffixDrafter, GreedyEqualsPlainAndRepeatsAnEarlierOutput) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    Session session(*target, kOneThread);
    const Seq prompt = target->tokenizer().encode("Once upon a time, there was a dog", true, false);
    const Seq plain = greedy(session, nullptr, prompt, 0);
    SuffixParams p;
    auto cache = std::make_shared<SuffixCache>(p);
    SuffixDrafter drafter(p, cache);
    SpecStats first, again;
    EXPECT_EQ(greedy(session, &drafter, prompt, 5, &first), plain);
    EXPECT_EQ(cache->n_outputs(), 1);
    EXPECT_EQ(greedy(session, &drafter, prompt, 5, &again), plain);
    // The repeated request drafts the earlier output: once min_match output tokens are in the
    // history, every draft is the rest of the earlier output, all accepted.
    EXPECT_GT(again.n_accepted, first.n_accepted);
    EXPECT_GE(double(again.n_accepted), 0.7 * double(plain.size())) << again.n_accepted;
    int from_cache = 0;
    for (const DraftTraceStep& s : again.trace) {
        const size_t at = size_t(s.pos) - prompt.size();
        if (at < size_t(p.min_match) || s.drafted.empty()) continue;
        EXPECT_TRUE(std::equal(s.drafted.begin(), s.drafted.end(), plain.begin() + long(at)))
            << "step " << s.step;
        ++from_cache;
    }
    EXPECT_GT(from_cache, 5);
}

TEST(SuffixDrafter, CombinedWithADraftModelKeepsGreedyOutput) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    auto draft = Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
    Session session(*target, kOneThread);
    const Seq prompt = target->tokenizer().encode(
        "Lily had a red ball. She liked the red ball. Lily had a red", true, false);
    const Seq plain = greedy(session, nullptr, prompt, 0);
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling.temp = 0.f;
    SuffixParams p;
    p.min_match = 2;
    SuffixDrafter drafter(p, nullptr, std::make_unique<DraftModelDrafter>(*draft, dp));
    SpecStats st;
    EXPECT_EQ(greedy(session, &drafter, prompt, 4, &st), plain);
    EXPECT_EQ(st.drafter, "suffix+draft-model");
    // Both kinds of steps ran: some drafted by the model (draft steps), some by the tree.
    EXPECT_GT(st.n_draft_steps, 0);
    EXPECT_GT(st.n_accepted, 0);
}
