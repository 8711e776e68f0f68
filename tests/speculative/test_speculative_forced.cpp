// Grammar-forced drafts (speculative/drafters/forced_drafts.h) through the engine, on the
// tinystories models under JSON schemas with long forced stretches:
//  - greedy without a drafter: the output equals plain greedy decoding with the same grammar
//    (forced drafts off), token for token, and takes fewer target passes;
//  - greedy with a draft model (llama2xs target, stories260K draft): the same output again, and
//    the forced tokens after the drafter's are accepted;
//  - sampling (with and without a drafter): every generation ends in JSON that matches the schema;
//  - sampling without a drafter: the first two tokens, drawn 2000 times, follow the constrained
//    target's exact p(t1) p(t2 | t1) (Pearson chi-square), although the draft proposes `{` and
//    `"` where the target may also choose whitespace.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "chi_square.h"
#include "model/session.h"
#include "sampling/constraints.h"
#include "sampling/json_grammar.h"
#include "spec_sampling_fixture.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

using namespace specula;
using json = nlohmann::json;

namespace {

using test::kOneThread;
using test::kTrials;
using test::spec_sampling;

const char* kAnswer =
    R"({"type":"object","properties":{"answer_to_the_question":{"type":"string"}},)"
    R"("required":["answer_to_the_question"],"additionalProperties":false})";
// Keys, enums, booleans: the forced stretches are most of the output.
const char* kForm =
    R"({"type":"object","properties":{"answer_to_the_question":{"enum":["yes","no","maybe"]},)"
    R"("the_model_is_sure_about_it":{"type":"boolean"},"the_level_of_confidence":{"enum":)"
    R"(["completely_certain","rather_unsure"]}},"required":["answer_to_the_question",)"
    R"("the_model_is_sure_about_it","the_level_of_confidence"],"additionalProperties":false})";

struct Models {
    std::unique_ptr<Model> small =
        Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    std::unique_ptr<Model> big = Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
};

const Models& models() {
    static Models m;
    return m;
}

// Constraints of a fresh generation: `schema` with at most max_ws whitespace bytes in a row.
Constraints constraints(const Model& m, const char* schema, const PenaltyParams& pen, int max_ws) {
    JsonGrammarOptions opt;
    opt.max_ws = max_ws;
    return Constraints(pen, m.hparams().n_vocab, json_schema_grammar(json::parse(schema), opt),
                       GrammarVocab::from_tokenizer(m.tokenizer()));
}

struct Outcome {
    std::vector<token_id> out;
    SpecStats st;
    std::string text;
};

// One generation of `target` under `schema`, with `draft` as the draft model (null: none).
Outcome generate(const Model& target, const Model* draft, const char* schema, SamplingParams sp,
                 int n_forced, int n_draft, int n_predict = 160, int max_ws = 16,
                 float p_min = 0.f) {
    Session session(target, kOneThread);
    Sampler sampler(sp);
    Constraints c = constraints(target, schema, PenaltyParams{}, max_ws);
    std::unique_ptr<DraftModelDrafter> drafter;
    if (draft) {
        DraftModelParams dp;
        dp.n_threads = 1;
        dp.sampling = sp;
        dp.p_min = p_min;
        drafter = std::make_unique<DraftModelDrafter>(*draft, dp);
    }
    GenParams gp;
    gp.n_predict = n_predict;
    gp.n_draft = n_draft;
    gp.n_forced = n_forced;
    Generator gen(session, sampler, drafter.get(), gp, nullptr, &c);
    const std::vector<token_id> prompt =
        target.tokenizer().encode("Once upon a time, a girl asked a question.", true, false);
    Outcome r;
    r.st = gen.generate(prompt);
    r.out = gen.output();
    r.text = target.tokenizer().decode(r.out);
    return r;
}

SamplingParams greedy() {
    SamplingParams sp;
    sp.temp = 0.f;
    return sp;
}

void print(const char* what, const Outcome& r) {
    std::printf("%-34s %3zu tokens, %3d target passes, forced %ld drafted / %ld accepted: %s\n",
                what, r.out.size(), r.st.n_target_passes, r.st.n_forced, r.st.n_forced_accepted,
                r.text.c_str());
}

TEST(ForcedDrafts, GreedyWithoutDrafterEqualsPlainInFewerPasses) {
    const Model& m = *models().small;
    // The story model writes whitespace wherever the grammar lets it (max_ws 16), which the
    // forced drafts leave aside; with max_ws 0 the forced tokens are nearly all it may write.
    for (int max_ws : {16, 0}) {
        for (const char* schema : {kAnswer, kForm}) {
            const Outcome plain = generate(m, nullptr, schema, greedy(), 0, 0, 160, max_ws);
            const Outcome forced = generate(m, nullptr, schema, greedy(), 8, 0, 160, max_ws);
            std::printf("max_ws %d\n", max_ws);
            print("plain", plain);
            print("forced drafts", forced);
            EXPECT_EQ(forced.out, plain.out);
            EXPECT_EQ(plain.st.n_forced, 0);
            EXPECT_GT(forced.st.n_forced_accepted, 0);
            EXPECT_EQ(forced.st.n_accepted, forced.st.n_forced_accepted) << "no drafter";
            EXPECT_EQ(plain.st.n_target_passes,
                      int(plain.out.size()) + (plain.st.stop_reason == "eog"));
            // Every accepted forced token is a pass saved (an end token drafted and accepted
            // comes with a bonus token nobody reads: one more).
            const int saved = plain.st.n_target_passes - forced.st.n_target_passes;
            EXPECT_TRUE(saved == forced.st.n_forced_accepted ||
                        saved + 1 == forced.st.n_forced_accepted)
                << saved << " passes saved, " << forced.st.n_forced_accepted << " forced accepted";
            EXPECT_LT(forced.st.n_target_passes, plain.st.n_target_passes);
        }
    }
    // Without whitespace the form is done in a third of the passes, the end token forced too.
    const Outcome plain = generate(m, nullptr, kForm, greedy(), 0, 0, 160, 0);
    const Outcome form = generate(m, nullptr, kForm, greedy(), 8, 0, 160, 0);
    ASSERT_EQ(form.st.stop_reason, "eog");
    EXPECT_EQ(json::parse(form.text).size(), 3u);
    EXPECT_LT(3 * form.st.n_target_passes, plain.st.n_target_passes);
}

TEST(ForcedDrafts, GreedyWithDraftModelEqualsPlain) {
    const Models& ms = models();
    long forced_accepted = 0;
    for (int max_ws : {16, 0}) {
        for (const char* schema : {kAnswer, kForm}) {
            const Outcome plain = generate(*ms.big, nullptr, schema, greedy(), 0, 0, 160, max_ws);
            // A draft that stops when unsure (--draft-p-min): the forced tokens fill the rest of
            // the draft length. (Where the grammar forces tokens the guided draft proposes them
            // itself, sure of them: forced drafts add little to a guided draft model.)
            const Outcome drafted =
                generate(*ms.big, ms.small.get(), schema, greedy(), 0, 6, 160, max_ws, 0.6f);
            const Outcome both =
                generate(*ms.big, ms.small.get(), schema, greedy(), 8, 6, 160, max_ws, 0.6f);
            std::printf("max_ws %d\n", max_ws);
            print("plain (llama2xs)", plain);
            print("draft model", drafted);
            print("draft model + forced drafts", both);
            EXPECT_EQ(drafted.out, plain.out);
            EXPECT_EQ(both.out, plain.out);
            EXPECT_EQ(drafted.st.n_forced, 0);
            EXPECT_LE(both.st.n_target_passes, drafted.st.n_target_passes);
            forced_accepted += both.st.n_forced_accepted;
        }
    }
    EXPECT_GT(forced_accepted, 0);
}

// The schema's JSON of a finished sampled generation.
void expect_form(const Outcome& r) {
    ASSERT_EQ(r.st.stop_reason, "eog") << r.text;
    const json j = json::parse(r.text);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j.size(), 3u);
    EXPECT_TRUE(j.at("the_model_is_sure_about_it").is_boolean());
    const std::string a = j.at("answer_to_the_question").get<std::string>();
    EXPECT_TRUE(a == "yes" || a == "no" || a == "maybe") << a;
}

TEST(ForcedDrafts, SampledGenerationsAreValidJson) {
    const Models& ms = models();
    long forced = 0;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
        SamplingParams sp;
        sp.temp = 0.9f;
        sp.seed = seed;
        const Outcome alone = generate(*ms.small, nullptr, kForm, sp, 8, 0, 400);
        const Outcome drafted = generate(*ms.big, ms.small.get(), kForm, sp, 8, 4, 400);
        expect_form(alone);
        expect_form(drafted);
        forced += alone.st.n_forced_accepted + drafted.st.n_forced_accepted;
    }
    EXPECT_GT(forced, 0);
}

// p(t1) p(t2 | t1) of the constrained target after the prompt.
std::map<std::pair<token_id, token_id>, double> exact_joint(const Model& m, Constraints c,
                                                            const SamplingParams& sp,
                                                            const std::vector<token_id>& prompt) {
    const int nv = m.hparams().n_vocab;
    Sampler s(sp);
    c.push_prompt(prompt);
    Session sess(m, kOneThread);
    sess.eval(prompt);
    std::vector<float> row;
    std::vector<TokenProb> p1, p2;
    s.distribution(c.apply(sess.logits(sess.n_logits() - 1), row), nv, p1);
    std::map<std::pair<token_id, token_id>, double> joint;
    for (const TokenProb& a : p1) {
        sess.rollback(int(prompt.size()));
        sess.eval(std::vector<token_id>{a.id});
        const Constraints::Mark mk = c.mark();
        EXPECT_TRUE(c.accept(a.id));
        s.distribution(c.apply(sess.logits(0), row), nv, p2);
        c.rewind(mk);
        for (const TokenProb& b : p2) joint[{a.id, b.id}] = double(a.p) * b.p;
    }
    return joint;
}

TEST(ForcedDrafts, SamplingKeepsTheTargetDistribution) {
    const Model& m = *models().small;
    SamplingParams sp = spec_sampling(0.f, 77);
    sp.top_k = 0;
    sp.top_p = 1.f;
    const std::vector<token_id> prompt = m.tokenizer().encode("The end.\n", true, false);
    // The story model writes whitespace, never `{` (a byte token in its vocabulary): a logit bias
    // for `{` and against whitespace makes the forced `{` compete with it at the second position
    // (at the first it is nearly always rejected: the residual path).
    PenaltyParams pen;
    for (token_id t = 0; t < m.hparams().n_vocab; ++t)
        if (m.tokenizer().token_to_piece(t, false) == "{") {
            pen.logit_bias.push_back({t, 11.f});
        } else if (m.tokenizer().token_to_piece(t, false).find_first_not_of(" \n") ==
                   std::string::npos) {
            pen.logit_bias.push_back({t, -3.f});
        }
    const auto exact = exact_joint(m, constraints(m, kAnswer, pen, 2), sp, prompt);
    Session session(m, kOneThread);
    Sampler sampler(sp);
    GenParams gp;
    gp.n_predict = 3;  // forced drafts at the first two positions (budget n_predict - 1, - 2)
    gp.n_draft = 0;
    gp.n_forced = 8;
    std::map<std::pair<token_id, token_id>, long> counts;
    long forced_rejected = 0, forced_accepted = 0;
    for (long t = 0; t < kTrials; ++t) {
        Constraints c = constraints(m, kAnswer, pen, 2);
        Generator gen(session, sampler, nullptr, gp, nullptr, &c);
        const SpecStats st = gen.generate(prompt);
        ASSERT_EQ(gen.output().size(), 3u);
        forced_rejected += st.n_forced - st.n_forced_accepted;
        forced_accepted += st.n_forced_accepted;
        ++counts[{gen.output()[0], gen.output()[1]}];
    }
    const test::ChiSquare cs = test::chi_square(exact, counts, kTrials);
    std::printf(
        "forced drafts, sampling: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f; forced drafts "
        "%ld accepted, %ld rejected\n",
        cs.stat, cs.df, cs.critical, forced_accepted, forced_rejected);
    ASSERT_GE(cs.df, 3) << "too few bins";
    EXPECT_LT(cs.stat, cs.critical);
    EXPECT_GT(forced_rejected, 500) << "the target often disagrees with the forced draft";
    EXPECT_GT(forced_accepted, 500);
}

}  // namespace
