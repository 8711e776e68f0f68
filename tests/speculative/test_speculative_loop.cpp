// The speculative generation loop and its parts on real models: KV caches of target and draft
// match a fresh evaluation of the history after speculative runs (rollback correctness), limits
// (n_predict, context, callback, prompt errors) hold exactly as in plain decoding, the n-gram
// drafter proposes what followed the latest earlier occurrence, statistics are consistent, and
// the vocabulary check accepts matching pairs and rejects the Llama-2-vocab model against
// stories260K, naming the first differing id.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/session.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/ngram_drafter.h"
#include "speculative/generator.h"
#include "speculative/make_drafter.h"
#include "speculative/vocab_check.h"
#include "test_util.h"

using namespace specula;

namespace {

const SessionParams kOneThread{0, 1};
const char* kTarget = "models/tinystories/stories260K.gguf";
const char* kDraft = "models/tinystories/llama2xs.gguf";

struct Models {
    std::unique_ptr<Model> target = Model::load(test::shared_path(kTarget));
    std::unique_ptr<Model> draft = Model::load(test::shared_path(kDraft));
    std::vector<token_id> prompt =
        target->tokenizer().encode("Tom and his dog went to the park. They saw a", true, false);
};

SamplingParams params(float temp, uint64_t seed = 3) {
    SamplingParams p;
    p.temp = temp;
    p.seed = seed;
    return p;
}

std::vector<float> last_logits(Session& s, std::span<const token_id> tokens) {
    s.eval(tokens);
    const float* l = s.logits(s.n_logits() - 1);
    return std::vector<float>(l, l + s.model().hparams().n_vocab);
}

}  // namespace

TEST(SpecLoop, CachesMatchAFreshEvaluationAfterSpeculativeRuns) {
    Models m;
    const int nv = m.target->hparams().n_vocab;
    for (float temp : {0.f, 0.9f}) {
        Session target(*m.target, kOneThread);
        DraftModelParams dp;
        dp.n_threads = 1;
        dp.sampling = params(temp);
        DraftModelDrafter drafter(*m.draft, dp);
        Sampler sampler(params(temp));
        GenParams gp;
        gp.n_predict = 70;
        gp.ignore_eos = true;
        gp.n_draft = 5;
        Generator gen(target, sampler, &drafter, gp);
        const SpecStats st = gen.generate(m.prompt);
        ASSERT_GT(st.n_drafts, 0);
        const std::vector<token_id>& h = gen.history();
        // Target: holds all of history but its last token.
        ASSERT_EQ(target.n_past(), int(h.size()) - 1);
        const auto after = last_logits(target, std::span(h).last(1));
        Session fresh(*m.target, kOneThread);
        EXPECT_EQ(after, last_logits(fresh, h)) << "temp " << temp;
        // Draft: a prefix of the history in its cache; its next proposal sees the exact
        // distribution a fresh draft session computes.
        const auto& cached = drafter.cached();
        ASSERT_LE(cached.size(), h.size());
        EXPECT_TRUE(std::equal(cached.begin(), cached.end(), h.begin()));
        EXPECT_EQ(drafter.session()->n_past(), int(cached.size()));
        Draft d;
        drafter.propose(h, 1, d);
        ASSERT_EQ(d.size(), 1);
        Session fresh_draft(*m.draft, kOneThread);
        const auto dl = last_logits(fresh_draft, h);
        if (temp == 0.f) {
            EXPECT_EQ(d.tokens[0], argmax(dl.data(), nv));
        } else {
            std::vector<TokenProb> q;
            Sampler(params(temp)).distribution(dl.data(), nv, q);
            ASSERT_EQ(d.q[0].size(), q.size());
            for (size_t i = 0; i < q.size(); ++i) {
                EXPECT_EQ(d.q[0][i].id, q[i].id);
                EXPECT_EQ(d.q[0][i].p, q[i].p);
            }
        }
    }
}

TEST(SpecLoop, LimitsMatchPlainDecoding) {
    Models m;
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling = params(0);
    DraftModelDrafter drafter(*m.draft, dp);
    auto gen_with = [&](Session& s, Drafter* d, GenParams gp, SpecStats* st) {
        Sampler sampler(params(0));
        return generate_tokens(s, sampler, d, m.prompt, gp, st);
    };
    // n_predict: exactly that many tokens even when a draft would overshoot.
    {
        Session s(*m.target, kOneThread);
        GenParams gp;
        gp.n_predict = 10;
        gp.ignore_eos = true;
        gp.n_draft = 8;
        SpecStats st;
        const auto spec = gen_with(s, &drafter, gp, &st);
        gp.n_draft = 0;
        EXPECT_EQ(spec, gen_with(s, nullptr, gp, nullptr));
        EXPECT_EQ(spec.size(), 10u);
        EXPECT_EQ(st.stop_reason, "n_predict");
    }
    // A small context: generation stops at it (or at an end token) without an error.
    {
        Session s(*m.target, SessionParams{40, 1});
        GenParams gp;
        gp.n_draft = 8;
        SpecStats st, st_plain;
        const auto spec = gen_with(s, &drafter, gp, &st);
        gp.n_draft = 0;
        EXPECT_EQ(spec, gen_with(s, nullptr, gp, &st_plain));
        EXPECT_EQ(st.stop_reason, st_plain.stop_reason);
        EXPECT_LE(int(m.prompt.size() + spec.size()), 41);
        EXPECT_TRUE(st.stop_reason == "context" || st.stop_reason == "eog") << st.stop_reason;
    }
    // The callback can stop generation; it sees every token in order.
    {
        Session s(*m.target, kOneThread);
        Sampler sampler(params(0));
        GenParams gp;
        gp.n_draft = 4;
        gp.ignore_eos = true;
        Generator gen(s, sampler, &drafter, gp);
        std::vector<token_id> seen;
        const SpecStats st = gen.generate(m.prompt, [&](token_id t, bool) {
            seen.push_back(t);
            return seen.size() < 7;
        });
        EXPECT_EQ(seen.size(), 7u);
        EXPECT_EQ(seen, gen.output());
        EXPECT_EQ(st.stop_reason, "callback");
    }
    // Bad prompts are errors, not crashes.
    {
        Session s(*m.target, SessionParams{8, 1});
        Sampler sampler(params(0));
        Generator gen(s, sampler, &drafter, GenParams{});
        EXPECT_THROW(gen.generate(m.prompt), Error);
        EXPECT_THROW(gen.generate(std::vector<token_id>{}), Error);
    }
}

TEST(SpecLoop, StatsAreConsistent) {
    Models m;
    Session s(*m.target, kOneThread);
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling = params(0);
    DraftModelDrafter drafter(*m.draft, dp);
    Sampler sampler(params(0));
    GenParams gp;
    gp.n_predict = 64;
    gp.ignore_eos = true;
    DraftLengthController automatic;  // --draft auto, owned here
    Generator gen(s, sampler, &drafter, gp, &automatic);
    long drafted_flags = 0;
    bool drafted_last = true;
    const SpecStats st = gen.generate(m.prompt, [&](token_id, bool drafted) {
        drafted_flags += drafted;
        drafted_last = drafted;
        return true;
    });
    EXPECT_EQ(st.n_generated, 64);
    // The callback marks exactly the accepted draft tokens (drafts never overshoot -n, so every
    // accepted one is emitted), and each step ends with the target's own token.
    EXPECT_EQ(drafted_flags, st.n_accepted);
    EXPECT_FALSE(drafted_last);
    // The caller's controller learnt from every step: its pooled acceptance left the prior.
    EXPECT_NE(automatic.pooled_accept(), DraftLengthController().pooled_accept());
    EXPECT_GT(automatic.draft_cost(), 0.0);
    EXPECT_GT(gen.engine().pass_cost().cost(1), 0.0);  // the engine measured the passes
    EXPECT_GT(st.plain_pass_ms, 0.0);
    EXPECT_EQ(int(gen.output().size()), 64);
    // Every pass yields its accepted drafts plus one token; the last pass may be cut short.
    EXPECT_GE(st.n_accepted + st.n_target_passes, 64);
    EXPECT_LE(st.n_accepted, st.n_drafted);
    EXPECT_GT(st.n_draft_steps, 0);
    long reached1 = st.pos_reached.at(0);
    EXPECT_EQ(reached1, st.n_drafts);
    for (int i = 1; i <= int(st.pos_reached.size()); ++i) {
        EXPECT_GE(st.pos_accept_rate(i), 0.0);
        EXPECT_LE(st.pos_accept_rate(i), 1.0);
    }
    const nlohmann::json j = st.to_json();
    EXPECT_EQ(j["generation"]["tokens"], 64);
    EXPECT_EQ(j["accepted_tokens"], st.n_accepted);
    EXPECT_EQ(j["drafter"], "draft-model");
    EXPECT_EQ(j["acceptance_by_position"].size(), st.pos_reached.size());
}

TEST(SpecLoop, NgramDrafterProposesWhatFollowedTheLatestOccurrence) {
    NgramDrafter ngram(NgramParams{2, 4});
    Draft d;
    const std::vector<token_id> h1{5, 1, 2, 9, 1, 2, 7, 1, 2};
    ngram.propose(h1, 3, d);
    EXPECT_EQ(d.tokens, (std::vector<token_id>{7, 1, 2}));
    ngram.propose(h1, 1, d);
    EXPECT_EQ(d.tokens, (std::vector<token_id>{7}));
    const std::vector<token_id> h2{3, 4, 5, 6, 3, 4, 5};  // the 3-gram wins over the 2-gram
    ngram.propose(h2, 8, d);
    EXPECT_EQ(d.tokens, (std::vector<token_id>{6, 3, 4, 5}));
    const std::vector<token_id> h3{1, 2, 3, 4};
    ngram.propose(h3, 4, d);
    EXPECT_TRUE(d.tokens.empty());
    EXPECT_THROW(NgramDrafter(NgramParams{3, 2}), Error);
}

TEST(SpecVocab, AcceptsMatchingPairs) {
    Models m;
    EXPECT_NO_THROW(check_vocab_compatible(m.target->tokenizer(), m.draft->tokenizer()));
    SpeculativeConfig c;
    c.method = SpecMethod::draft_model;
    c.draft_model = test::shared_path(kDraft);
    const SpeculativeSetup s = load_speculative(c, *m.target);
    ASSERT_NE(s.draft_model, nullptr);
    const auto drafter = make_drafter(s, DrafterParams{0, 1, params(0)});
    ASSERT_NE(drafter, nullptr);
    EXPECT_STREQ(drafter->name(), "draft-model");
    c = SpeculativeConfig{};
    EXPECT_EQ(make_drafter(load_speculative(c, *m.target), DrafterParams{}), nullptr);
    c.method = SpecMethod::ngram;
    const SpeculativeSetup ngram = load_speculative(c, *m.target);
    EXPECT_EQ(ngram.draft_model, nullptr);
    EXPECT_STREQ(make_drafter(ngram, DrafterParams{})->name(), "ngram");
}

TEST(SpecVocab, RejectsTheLlama2VocabularyNamingTheFirstDifference) {
    const std::string llama2 = "models/synthetic/rand-llama-d256-l2-Q4_K_M.gguf";
    // The first differing id, straight from the two files' token lists.
    const auto a =
        GGUFFile::open(test::shared_path(kTarget))->get_string_array("tokenizer.ggml.tokens");
    const auto b =
        GGUFFile::open(test::shared_path(llama2))->get_string_array("tokenizer.ggml.tokens");
    size_t first = 0;
    while (first < std::min(a.size(), b.size()) && a[first] == b[first]) ++first;
    ASSERT_LT(first, std::min(a.size(), b.size()));

    Models m;
    auto other = Model::load(test::shared_path(llama2));
    try {
        check_vocab_compatible(m.target->tokenizer(), other->tokenizer(), kTarget, llama2);
        FAIL() << "no error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("token id " + std::to_string(first) + ":"), std::string::npos) << msg;
        EXPECT_NE(msg.find("'" + a[first] + "'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("'" + b[first] + "'"), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos);
    }
    SpeculativeConfig c;
    c.method = SpecMethod::draft_model;
    c.draft_model = test::shared_path(llama2);
    EXPECT_THROW(load_speculative(c, *m.target), Error);
}

TEST(SpecLoop, PMinCutsDraftsShortWithoutChangingTheOutput) {
    Models m;
    Session s(*m.target, kOneThread);
    GenParams gp;
    gp.n_predict = 48;
    gp.ignore_eos = true;
    gp.n_draft = 8;
    auto run = [&](float p_min, SpecStats* st) {
        DraftModelParams dp;
        dp.n_threads = 1;
        dp.p_min = p_min;
        dp.sampling = params(0);
        DraftModelDrafter drafter(*m.draft, dp);
        Sampler sampler(params(0));
        return generate_tokens(s, sampler, &drafter, m.prompt, gp, st);
    };
    SpecStats full, cut, none;
    const auto a = run(0.0f, &full);
    const auto b = run(0.9f, &cut);
    const auto c = run(1.01f, &none);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
    // p_min 0 always drafts N tokens (but the last draft, cut to the -n budget).
    EXPECT_GT(full.n_drafted, 8L * (full.n_drafts - 1));
    EXPECT_LT(cut.n_drafted, 8L * cut.n_drafts);
    EXPECT_GE(cut.accept_rate(), full.accept_rate()) << "confident drafts are accepted more";
    EXPECT_EQ(none.n_drafted, 0);
}
