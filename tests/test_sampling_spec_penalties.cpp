// Speculative sampling with penalties stays exact: with the stories260K target and the llama2xs
// draft, repetition / presence / frequency penalties and a logit bias, the first two tokens drawn
// thousands of times through penalised drafting + rejection sampling follow the exact joint
// p(t1) p(t2 | t1) of the PENALISED target (Pearson chi-square), where the history of verify
// position i is the prompt + accepted tokens + d_1..d_{i-1}. A verifier that penalises every
// position with the history before the draft (the natural mistake) is rejected by the same
// statistic, so the test can see the difference.
//
// The speculative machinery used is src/spec's Verifier (evaluate + decide); the whole dependency
// on it is verify_step() below. Penalties reach the verifier by penalising the target's logit
// rows in place between evaluate() and decide() (the wiring will do it inside the verifier).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "model/model.h"
#include "sampling/penalties.h"
#include "spec/categorical.h"
#include "spec/verifier.h"
#include "test_util.h"

using namespace specula;

namespace {

const SessionParams kOneThread{0, 1};
const int kTrials = 2000;
const int kDraft = 3;

SamplingParams sampling(uint64_t seed) {
    SamplingParams p;
    p.temp = 1.0f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.02f;
    p.seed = seed;
    return p;
}

using Pair = std::pair<token_id, token_id>;

struct Fixture {
    std::unique_ptr<Model> target, draft;
    std::vector<token_id> prompt;
    PenaltyParams pen;
    Fixture() {
        target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
        draft = Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
        prompt =
            target->tokenizer().encode("Tom and his dog went to the park. They saw a", true, false);
        // Negative presence / frequency penalties over a 2-token window reward repeating a recent
        // token, so the second token depends strongly on whether the first is in the history.
        pen.repeat_penalty = 1.1f;
        pen.repeat_last_n = 2;
        pen.presence_penalty = -5.0f;
        pen.frequency_penalty = -0.5f;
        pen.logit_bias = {{target->tokenizer().encode(" big", false, false).at(0), -INFINITY}};
    }
};

// Exact p(t1) p(t2 | t1) of the penalised target.
std::map<Pair, double> exact_joint(const Fixture& f) {
    const int nv = f.target->hparams().n_vocab;
    Sampler s(sampling(1));
    Penalizer pen(f.pen, nv);
    pen.push(f.prompt);
    std::vector<float> row;
    Session sess(*f.target, kOneThread);
    sess.eval(f.prompt);
    std::vector<TokenProb> p1, p2;
    s.distribution(pen.apply(sess.logits(sess.n_logits() - 1), row), nv, p1);
    std::map<Pair, double> joint;
    for (const TokenProb& a : p1) {
        sess.rollback(int(f.prompt.size()));
        sess.eval(std::vector<token_id>{a.id});
        pen.push(a.id);
        s.distribution(pen.apply(sess.logits(0), row), nv, p2);
        pen.pop();
        for (const TokenProb& b : p2) joint[{a.id, b.id}] = double(a.p) * b.p;
    }
    return joint;
}

// Drafts up to n tokens by sampling the penalised draft model; `pen` holds the history and is
// left as it was. The draft session holds history minus its last token on entry and exit.
void propose(Session& ds, Penalizer& pen, Sampler& s, std::span<const token_id> history, int n,
             Draft& out) {
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
        pen.push(last);
    }
    pen.truncate(history.size());
    ds.rollback(n_past);
}

// The verifier's step with penalised target rows. stale: every position uses the history
// before the draft (wrong). `pen` holds the history and is left as it was.
VerifyResult verify_step(Verifier& v, Session& target, Penalizer& pen, Sampler& s, token_id last,
                         const Draft& draft, bool stale) {
    const size_t base = pen.size();
    v.evaluate(target, last, draft);
    for (int i = 0; i <= draft.size(); ++i) {
        pen.apply(const_cast<float*>(target.logits(i)));
        if (!stale && i < draft.size()) pen.push(draft.tokens[i]);
    }
    pen.truncate(base);
    return v.decide(target, draft, s);
}

std::map<Pair, long> sample_pairs(const Fixture& f, bool stale) {
    const int nv = f.target->hparams().n_vocab;
    Session target(*f.target, kOneThread), ds(*f.draft, kOneThread);
    Verifier verifier(nv);
    Sampler sampler(sampling(12345)), draft_sampler(sampling(99));
    Penalizer pen(f.pen, nv);
    Draft draft;
    std::vector<token_id> history;
    std::map<Pair, long> counts;
    const std::span<const token_id> head = std::span(f.prompt).first(f.prompt.size() - 1);
    target.eval(head);
    ds.eval(head);
    for (int t = 0; t < kTrials; ++t) {
        history = f.prompt;
        pen.reset();
        pen.push(history);
        target.rollback(int(f.prompt.size()) - 1);
        ds.rollback(int(f.prompt.size()) - 1);
        while (history.size() < f.prompt.size() + 2) {
            propose(ds, pen, draft_sampler, history, kDraft, draft);
            const VerifyResult r =
                verify_step(verifier, target, pen, sampler, history.back(), draft, stale);
            for (int i = 0; i < r.n_accepted; ++i) history.push_back(draft.tokens[i]);
            history.push_back(r.next);
            pen.push(std::span(history).last(size_t(r.n_accepted) + 1));
            ds.eval(std::span(history).subspan(size_t(ds.n_past()),
                                               history.size() - 1 - size_t(ds.n_past())));
        }
        ++counts[{history[f.prompt.size()], history[f.prompt.size() + 1]}];
    }
    return counts;
}

struct ChiSquare {
    double stat = 0, critical = 0;
    int df = 0;
};

// Pearson chi-square over the pairs expected >= 5 times, the rest pooled into one bin; critical
// value at p = 1e-4 (Wilson-Hilferty).
ChiSquare chi_square(const std::map<Pair, double>& p, const std::map<Pair, long>& counts) {
    ChiSquare c;
    double pooled_e = 0, pooled_o = 0;
    int bins = 0;
    for (const auto& [pair, prob] : p) {
        const double e = prob * kTrials;
        const auto it = counts.find(pair);
        const double o = it == counts.end() ? 0 : double(it->second);
        if (e >= 5) {
            c.stat += (o - e) * (o - e) / e;
            ++bins;
        } else {
            pooled_e += e, pooled_o += o;
        }
    }
    for (const auto& [pair, n] : counts)
        if (!p.count(pair)) pooled_o += double(n);  // pairs of probability 0
    if (pooled_e > 0) {
        c.stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
        ++bins;
    } else if (pooled_o > 0) {
        c.stat = INFINITY;
    }
    c.df = bins - 1;
    const double k = c.df, z = 3.719;
    c.critical = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
    return c;
}

}  // namespace

TEST(SpecPenalties, FirstTwoTokensFollowThePenalisedTarget) {
    Fixture f;
    const auto exact = exact_joint(f);
    const ChiSquare c = chi_square(exact, sample_pairs(f, false));
    std::printf("penalised speculative: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f\n", c.stat,
                c.df, c.critical);
    ASSERT_GE(c.df, 5) << "too few bins for a meaningful test";
    EXPECT_LT(c.stat, c.critical);
}

TEST(SpecPenalties, ChiSquareRejectsAVerifierThatIgnoresDraftedTokens) {
    Fixture f;
    const auto exact = exact_joint(f);
    const ChiSquare c = chi_square(exact, sample_pairs(f, true));
    std::printf("stale history: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f\n", c.stat, c.df,
                c.critical);
    EXPECT_GT(c.stat, c.critical);
}
