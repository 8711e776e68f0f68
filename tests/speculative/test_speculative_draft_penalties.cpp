// The draft model applies the target's penalties and logit bias (the Generator guides it with the
// target's Constraints, Drafter::guide):
// greedy speculative output with penalties equals plain output with them, the draft accepts more
// than a draft blind to the penalties, and with sampling the first two tokens, drawn thousands of
// times through the generation loop, follow the target's exact penalised joint distribution
// p(t1) p(t2 | t1) (Pearson chi-square), where p(t2 | t1) is penalised by t1 too.
#include <gtest/gtest.h>

#include <map>

#include "chi_square.h"
#include "model/session.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

using namespace specula;

namespace {

struct Fixture {
    std::unique_ptr<Model> target =
        Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    std::unique_ptr<Model> draft =
        Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
    std::vector<token_id> prompt =
        target->tokenizer().encode("Tom and his dog went to the park. They saw a", true, false);
    PenaltyParams pen;
    Fixture() {
        pen.repeat_penalty = 1.5f;
        pen.repeat_last_n = 64;
        pen.presence_penalty = 0.5f;
        pen.frequency_penalty = 0.4f;
        pen.logit_bias = {{target->tokenizer().encode(" park", false, false).at(0), -3.f}};
    }
};

// A draft blind to the constraints: forwards everything but the guide (its own stays unused).
class BlindDrafter final : public Drafter {
  public:
    explicit BlindDrafter(Drafter& inner) : inner_(inner) {}
    const char* name() const override { return inner_.name(); }
    void begin(std::span<const token_id> prompt) override { inner_.begin(prompt); }
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override {
        return inner_.start(history, n_max, out);
    }
    std::span<const token_id> next(Draft& out) override { return inner_.next(out); }
    Session* session() override { return inner_.session(); }
    int steps() const override { return inner_.steps(); }
    void accept(int n_kept) override { inner_.accept(n_kept); }

  private:
    Drafter& inner_;
};

struct Outcome {
    std::vector<token_id> out;
    SpecStats st;
};

Outcome generate(const Fixture& f, const SamplingParams& sp, bool draft_penalties, int n_draft,
                 int n_predict) {
    Session target(*f.target, SessionParams{0, 1});
    Sampler sampler(sp);
    Constraints c(f.pen, f.target->hparams().n_vocab);
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling = sp;
    DraftModelDrafter model_drafter(*f.draft, dp);
    BlindDrafter blind(model_drafter);
    Drafter& drafter = draft_penalties ? static_cast<Drafter&>(model_drafter) : blind;
    GenParams gp;
    gp.n_predict = n_predict;
    gp.ignore_eos = true;
    gp.n_draft = n_draft;
    Generator gen(target, sampler, n_draft > 0 ? &drafter : nullptr, gp, nullptr, &c);
    Outcome r;
    r.st = gen.generate(f.prompt);
    r.out = gen.output();
    return r;
}

}  // namespace

TEST(DraftPenalties, GreedyExactAndAcceptsMore) {
    const Fixture f;
    SamplingParams greedy;
    greedy.temp = 0.f;
    const Outcome plain = generate(f, greedy, false, 0, 160);
    const Outcome blind = generate(f, greedy, false, 4, 160);
    const Outcome aware = generate(f, greedy, true, 4, 160);
    EXPECT_EQ(blind.out, plain.out);
    EXPECT_EQ(aware.out, plain.out);
    std::printf(
        "acceptance with penalties: draft blind to them %.1f%%, draft applying them %.1f%%\n",
        100 * blind.st.accept_rate(), 100 * aware.st.accept_rate());
    EXPECT_GT(aware.st.accept_rate(), blind.st.accept_rate());
}

TEST(DraftPenalties, SamplingFollowsThePenalisedTarget) {
    const Fixture f;
    SamplingParams sp;
    sp.temp = 1.0f;
    sp.top_k = 40;
    sp.top_p = 0.95f;
    sp.min_p = 0.05f;
    // Exact penalised p(t1) p(t2 | t1).
    const int nv = f.target->hparams().n_vocab;
    std::map<std::pair<token_id, token_id>, double> exact;
    {
        Sampler s(sp);
        Session sess(*f.target, SessionParams{0, 1});
        Constraints c(f.pen, nv);
        c.push_prompt(f.prompt);
        std::vector<float> row;
        std::vector<TokenProb> p1, p2;
        sess.eval(f.prompt);
        s.distribution(c.apply(sess.logits(sess.n_logits() - 1), row), nv, p1);
        for (const TokenProb& a : p1) {
            sess.rollback(int(f.prompt.size()));
            sess.eval(std::vector<token_id>{a.id});
            const Constraints::Mark m = c.mark();
            c.accept(a.id);
            s.distribution(c.apply(sess.logits(0), row), nv, p2);
            c.rewind(m);
            for (const TokenProb& b : p2) exact[{a.id, b.id}] = double(a.p) * b.p;
        }
    }
    const int kTrials = 1500;
    std::map<std::pair<token_id, token_id>, long> counts;
    for (int t = 0; t < kTrials; ++t) {
        sp.seed = 1000 + uint64_t(t);
        const Outcome r = generate(f, sp, true, 3, 2);
        ASSERT_EQ(r.out.size(), 2u);
        ++counts[{r.out[0], r.out[1]}];
    }
    const test::ChiSquare c = test::chi_square(exact, counts, kTrials);
    std::printf("draft with penalties: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f\n", c.stat,
                c.df, c.critical);
    ASSERT_GE(c.df, 5);
    EXPECT_LT(c.stat, c.critical);
}
