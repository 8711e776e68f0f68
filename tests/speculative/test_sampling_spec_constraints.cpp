// Speculative sampling with Constraints stays exact: with the stories260K target and the llama2xs
// draft, (a) repetition / presence / frequency penalties and a logit bias, (b) the same plus the
// json_object grammar, (c) DRY alone (sampling/dry.h, with llama.cpp's default breakers), the first
// two tokens drawn thousands of times through constrained drafting
// + rejection sampling follow the exact joint p(t1) p(t2 | t1) of the CONSTRAINED target
// (Pearson chi-square), where verify position i sees the prompt + accepted tokens + d_1..d_{i-1}.
// A verifier that constrains every position with the state before the draft (the natural
// mistake) is rejected by the same statistic, so the test can see the difference.
//
// The speculative machinery used is speculative/verifier.h's pure verify(); the whole dependency
// on it is verify_step() below, which evaluates the target itself and hands verify() the
// constrained rows (as the generator does).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "chi_square.h"
#include "model/session.h"
#include "sampling/constraints.h"
#include "spec_sampling_fixture.h"
#include "speculative/drafters/categorical.h"
#include "speculative/verifier.h"
#include "test_util.h"

using namespace specula;

namespace {

using namespace specula::test;  // spec_sampling_fixture.h: kOneThread, kTrials, kDraft, ...
using Pair = TokenPair;

SamplingParams sampling(uint64_t seed) {  // min-p 0.02
    return spec_sampling(0.02f, seed);
}

struct Fixture : test::SpecModels {
    PenaltyParams pen;
    std::shared_ptr<const JsonGrammar> grammar;
    std::shared_ptr<const GrammarVocab> vocab;
    std::shared_ptr<const DryBreakers> breakers;
    enum Mode { kPenalties, kGrammar, kDry };
    explicit Fixture(Mode mode) {
        const bool with_grammar = mode == kGrammar;
        // Negative presence / frequency penalties over a 2-token window reward repeating a recent
        // token, so the second token depends strongly on whether the first is in the history.
        pen.repeat_penalty = 1.1f;
        pen.repeat_last_n = 2;
        pen.presence_penalty = -5.0f;
        pen.frequency_penalty = -0.5f;
        pen.logit_bias = {{target->tokenizer().encode(" big", false, false).at(0), -INFINITY}};
        if (with_grammar) {
            // The output so far opened a JSON object: the next two tokens are a value.
            grammar = json_object_grammar();
            vocab = GrammarVocab::from_tokenizer(target->tokenizer());
            n_plain = prompt.size();
            for (token_id t : target->tokenizer().encode(kJsonPrefix, false, false))
                prompt.push_back(t);
        }
        if (mode == kDry) {
            // DRY, after a prompt that repeats itself: the second token is penalised by what
            // followed the first one in the prompt.
            prompt = target->tokenizer().encode("Tom saw a big dog. Tom saw a big cat. Tom saw a",
                                                true, false);
            // A logit bias makes " big" the likely first token (against DRY's penalty for
            // repeating ". Tom saw a big"); DRY then pushes down " do(g)" and " c(at)", which
            // followed it before: a verifier that forgot " big" would not.
            pen = PenaltyParams{};
            pen.logit_bias = {{target->tokenizer().encode("big", false, false).back(), 6.0f}};
            pen.dry.multiplier = 4.0f;
            pen.dry.allowed_length = 5;
            breakers = DryBreakers::from_tokenizer(pen.dry.sequence_breakers, target->tokenizer());
        }
    }
    static constexpr const char* kJsonPrefix = "{\"a\": [\"";
    size_t n_plain = SIZE_MAX;  // prompt tokens before the JSON output
    Constraints constraints() const {
        Constraints c(pen, target->hparams().n_vocab, grammar, vocab, breakers);
        const size_t n = std::min(n_plain, prompt.size());
        c.push_prompt(std::span(prompt).first(n));
        for (size_t i = n; i < prompt.size(); ++i) EXPECT_TRUE(c.accept(prompt[i]));
        return c;
    }
};

// Exact p(t1) p(t2 | t1) of the constrained target.
std::map<Pair, double> exact_joint(const Fixture& f) {
    const int nv = f.target->hparams().n_vocab;
    Sampler s(sampling(1));
    Constraints pen = f.constraints();
    std::vector<float> row;
    Session sess(*f.target, kOneThread);
    sess.eval(f.prompt);
    std::vector<TokenProb> p1, p2;
    s.distribution(pen.apply(sess.logits(sess.n_logits() - 1), row), nv, p1);
    std::map<Pair, double> joint;
    for (const TokenProb& a : p1) {
        sess.rollback(int(f.prompt.size()));
        sess.eval(std::vector<token_id>{a.id});
        const Constraints::Mark m = pen.mark();
        EXPECT_TRUE(pen.accept(a.id));
        s.distribution(pen.apply(sess.logits(0), row), nv, p2);
        pen.rewind(m);
        for (const TokenProb& b : p2) joint[{a.id, b.id}] = double(a.p) * b.p;
    }
    return joint;
}

// Drafts up to n tokens by sampling the constrained draft model; `pen` is left as it was. The
// draft session holds history minus its last token on entry and exit.
void propose(Session& ds, Constraints& pen, Sampler& s, std::span<const token_id> history, int n,
             Draft& out) {
    const Constraints::Mark m = pen.mark();
    const int nv = ds.model().hparams().n_vocab;
    const int n_past = ds.n_past();
    std::vector<float> row;
    out.clear();
    out.has_q = true;
    token_id last = history.back();
    for (int i = 0; i < n; ++i) {
        ds.eval(std::span(&last, 1));
        std::vector<TokenProb>& q = out.next_q();
        s.distribution(pen.apply(ds.logits(0), row), nv, q);
        last = sample_categorical(q, s.uniform());
        out.tokens.push_back(last);
        EXPECT_TRUE(pen.accept(last));
    }
    pen.rewind(m);
    ds.rollback(n_past);
}

// The verifier's step with constrained target rows. stale: every position uses the state
// before the draft (wrong). `pen` is left as it was.
Verdict verify_step(VerifyScratch& v, Session& target, Constraints& pen, Sampler& s, token_id last,
                    const Draft& draft, bool stale) {
    const Constraints::Mark m = pen.mark();
    const size_t nv = size_t(target.model().hparams().n_vocab);
    const int n_past = target.n_past();
    std::vector<token_id> batch{last};
    batch.insert(batch.end(), draft.tokens.begin(), draft.tokens.end());
    target.eval(batch);
    std::vector<std::vector<float>> rows(size_t(draft.size()) + 1);
    std::vector<const float*> ptrs;
    std::vector<float> row;
    for (int i = 0; i <= draft.size(); ++i) {
        const float* c = pen.apply(target.logits(i), row);
        rows[size_t(i)].assign(c, c + nv);
        ptrs.push_back(rows[size_t(i)].data());
        // A token the grammar refuses has p = 0 here: the verifier rejects it at i.
        if (!stale && i < draft.size() && !pen.accept(draft.tokens[i])) {
            for (int j = i + 1; j <= draft.size(); ++j) ptrs.push_back(ptrs.back());
            break;
        }
    }
    pen.rewind(m);
    const Verdict r = verify(draft, LogitRows{ptrs, int(nv)}, s, v);
    target.rollback(n_past + 1 + r.n_accepted);
    return r;
}

std::map<Pair, long> sample_pairs(const Fixture& f, bool stale) {
    const int nv = f.target->hparams().n_vocab;
    Session target(*f.target, kOneThread), ds(*f.draft, kOneThread);
    VerifyScratch verifier(nv);
    Sampler sampler(sampling(12345)), draft_sampler(sampling(99));
    Constraints pen = f.constraints();
    const Constraints::Mark start = pen.mark();
    Draft draft;
    std::vector<token_id> history;
    std::map<Pair, long> counts;
    const std::span<const token_id> head = std::span(f.prompt).first(f.prompt.size() - 1);
    target.eval(head);
    ds.eval(head);
    for (int t = 0; t < kTrials; ++t) {
        history = f.prompt;
        pen.rewind(start);
        target.rollback(int(f.prompt.size()) - 1);
        ds.rollback(int(f.prompt.size()) - 1);
        while (history.size() < f.prompt.size() + 2) {
            propose(ds, pen, draft_sampler, history, kDraft, draft);
            const Verdict r =
                verify_step(verifier, target, pen, sampler, history.back(), draft, stale);
            for (int i = 0; i < r.n_accepted; ++i) history.push_back(draft.tokens[i]);
            history.push_back(r.token);
            // (The stale verifier can keep tokens the grammar refuses.)
            for (token_id t : std::span(history).last(size_t(r.n_accepted) + 1))
                if (!pen.accept(t) && !stale) ADD_FAILURE() << "the grammar refused " << t;
            ds.eval(std::span(history).subspan(size_t(ds.n_past()),
                                               history.size() - 1 - size_t(ds.n_past())));
        }
        ++counts[{history[f.prompt.size()], history[f.prompt.size() + 1]}];
    }
    return counts;
}

const char* name(Fixture::Mode m) {
    return m == Fixture::kGrammar ? "grammar + penalties"
           : m == Fixture::kDry   ? "DRY"
                                  : "penalties";
}

void expect_exact(Fixture::Mode mode) {
    Fixture f(mode);
    const auto exact = exact_joint(f);
    const test::ChiSquare c = test::chi_square(exact, sample_pairs(f, false), kTrials);
    std::printf("%s speculative: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f\n", name(mode),
                c.stat, c.df, c.critical);
    ASSERT_GE(c.df, 5) << "too few bins for a meaningful test";
    EXPECT_LT(c.stat, c.critical);
}

void expect_stale_rejected(Fixture::Mode mode) {
    Fixture f(mode);
    const auto exact = exact_joint(f);
    const test::ChiSquare c = test::chi_square(exact, sample_pairs(f, true), kTrials);
    std::printf("%s, stale state: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f\n", name(mode),
                c.stat, c.df, c.critical);
    EXPECT_GT(c.stat, c.critical);
}

}  // namespace

TEST(SpecConstraints, PenalisedFirstTwoTokensFollowTheTarget) {
    expect_exact(Fixture::kPenalties);
}
TEST(SpecConstraints, PenaltiesChiSquareRejectsAStaleVerifier) {
    expect_stale_rejected(Fixture::kPenalties);
}
TEST(SpecConstraints, GrammarFirstTwoTokensFollowTheTarget) {
    expect_exact(Fixture::kGrammar);
}
TEST(SpecConstraints, GrammarChiSquareRejectsAStaleVerifier) {
    expect_stale_rejected(Fixture::kGrammar);
}
TEST(SpecConstraints, DryFirstTwoTokensFollowTheTarget) {
    expect_exact(Fixture::kDry);
}
TEST(SpecConstraints, DryChiSquareRejectsAStaleVerifier) {
    expect_stale_rejected(Fixture::kDry);
}
