// MtpDrafter's bookkeeping (speculative/drafters/mtp_drafter.h) against a plain recomputation: its
// drafts after the prompt, and after a verify pass with one draft kept plus a correction, equal the
// argmax chain of a second session that evaluates the whole history with every hidden row and
// runs the head over the same positions (from the prompt's last one) without any rollback.
// `--spec-type mtp` on a file without the head is an Error naming the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "arch_test_util.h"
#include "chi_square.h"
#include "common/error.h"
#include "model/load/model.h"
#include "model/session.h"
#include "sampling/constraints.h"
#include "sampling/grammar_vocab.h"
#include "sampling/json_grammar.h"
#include "sampling/sampler.h"
#include "speculative/config.h"
#include "speculative/drafters/mtp_drafter.h"
#include "speculative/generator.h"
#include "speculative/make_drafter.h"
#include "test_util.h"

namespace {

using namespace specula;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";

SessionParams params() {
    SessionParams p;
    p.n_ctx = 128;
    p.n_threads = 1;
    return p;
}

SamplingParams greedy() {
    SamplingParams p;
    p.temp = 0.f;
    return p;
}

// The head's greedy chain of k tokens for `history` (its last token the next to evaluate), the
// head's cache starting at position `base`, computed from scratch.
std::vector<token_id> reference(const Model& m, const std::vector<token_id>& history, int base,
                                int k) {
    Session r(m, params());
    const int L = int(history.size()) - 1;
    r.eval(std::span(history).first(size_t(L)));  // every row: every hidden state
    const size_t d = size_t(m.hparams().n_embd);
    const int nv = m.hparams().n_vocab;
    std::vector<token_id> next(history.begin() + base + 1, history.end());
    std::vector<float> h;
    for (int p = base; p < L; ++p) h.insert(h.end(), r.hidden(p), r.hidden(p) + d);
    r.eval_mtp(next, h.data());
    std::vector<token_id> out{argmax(r.mtp_logits(int(next.size()) - 1), nv)};
    int row = int(next.size()) - 1;
    while (int(out.size()) < k) {
        const std::vector<float> hh(r.mtp_hidden(row), r.mtp_hidden(row) + d);
        r.eval_mtp(std::span(&out.back(), 1), hh.data());
        row = 0;
        out.push_back(argmax(r.mtp_logits(0), nv));
    }
    return out;
}

TEST(MtpDrafter, DraftsEqualTheRecomputedChain) {
    const auto m = Model::load(kDir + "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf");
    std::vector<token_id> history = test::random_tokens(10, 4);
    const int L = int(history.size()) - 1;
    Session s(*m, params());
    s.eval(std::span(history).first(size_t(L)), /*all_logits=*/false);
    MtpDrafter drafter(*m, greedy());
    drafter.attach(&s);
    drafter.begin(history);
    Draft draft;
    drafter.propose(history, 3, draft);  // its rounds: head passes on s
    ASSERT_EQ(draft.size(), 3);
    EXPECT_EQ(drafter.steps(), 3);
    EXPECT_EQ(draft.tokens, reference(*m, history, L - 1, 3));
    // The target verifies [last, d1, d2, d3], keeps d1 and corrects the rest.
    std::vector<token_id> batch{history.back()};
    batch.insert(batch.end(), draft.tokens.begin(), draft.tokens.end());
    s.eval(batch);
    s.rollback(L + 2);
    drafter.accept(1);
    const token_id correction = token_id((draft.tokens[1] + 1) % m->hparams().n_vocab);
    history.push_back(draft.tokens[0]);
    history.push_back(correction);
    drafter.propose(history, 2, draft);
    ASSERT_EQ(draft.size(), 2);
    EXPECT_EQ(draft.tokens, reference(*m, history, L - 1, 2));
    // And once more after nothing was kept.
    batch.assign({history.back()});
    batch.insert(batch.end(), draft.tokens.begin(), draft.tokens.end());
    s.eval(batch);
    s.rollback(int(history.size()));
    drafter.accept(0);
    history.push_back(token_id((draft.tokens[0] + 7) % m->hparams().n_vocab));
    drafter.propose(history, 4, draft);
    ASSERT_EQ(draft.size(), 4);
    EXPECT_EQ(draft.tokens, reference(*m, history, L - 1, 4));
}

// Sampling with MTP drafts keeps the target's distribution: the first two generated tokens,
// drawn through the generation loop (head drafts of 3, rejection sampling) with fresh seeds,
// follow the target's exact p(t1) p(t2 | t1) under the sampling transforms (Pearson chi-square),
// for the dense head and for qwen35moe's head with its own experts.
void expect_mtp_sampling_exact(const std::string& file) {
    SCOPED_TRACE(file);
    const auto m = Model::load(kDir + file);
    const int nv = m->hparams().n_vocab;
    SamplingParams sp;
    sp.temp = 1.5f;  // the random head's logits are peaked: spread them over more bins
    sp.top_k = 40;
    sp.top_p = 0.95f;
    sp.min_p = 0.02f;
    const std::vector<token_id> prompt = test::random_tokens(9, 11);
    std::map<std::pair<token_id, token_id>, double> exact;
    {
        Sampler s(sp);
        Session sess(*m, params());
        std::vector<TokenProb> p1, p2;
        sess.eval(prompt);
        s.distribution(sess.logits(sess.n_logits() - 1), nv, p1);
        for (const TokenProb& a : p1) {
            sess.rollback(int(prompt.size()));
            sess.eval(std::vector<token_id>{a.id});
            s.distribution(sess.logits(0), nv, p2);
            for (const TokenProb& b : p2) exact[{a.id, b.id}] = double(a.p) * b.p;
        }
    }
    const int kTrials = 1500;
    std::map<std::pair<token_id, token_id>, long> counts;
    Session target(*m, params());
    SamplingParams dsp = sp;
    dsp.seed = 77;
    MtpDrafter drafter(*m, dsp);
    SpecStats all;
    for (int t = 0; t < kTrials; ++t) {
        sp.seed = 5000 + uint64_t(t);
        Sampler sampler(sp);
        GenParams gp;
        gp.n_predict = 2;
        gp.ignore_eos = true;
        gp.n_draft = 3;
        SpecStats st;
        const auto out = generate_tokens(target, sampler, &drafter, prompt, gp, &st);
        ASSERT_EQ(out.size(), 2u);
        ++counts[{out[0], out[1]}];
        all.n_drafted += st.n_drafted;
        all.n_accepted += st.n_accepted;
    }
    // After t1 only one token is left to draft; some of those drafts are kept.
    EXPECT_EQ(all.n_drafted, kTrials);
    EXPECT_GT(all.n_accepted, 10);
    const test::ChiSquare c = test::chi_square(exact, counts, kTrials);
    std::printf(
        "mtp sampling: chi2 = %.1f, df = %d, critical (p=1e-4) = %.1f, accepted %ld of %ld\n",
        c.stat, c.df, c.critical, long(all.n_accepted), long(all.n_drafted));
    ASSERT_GE(c.df, 5);
    EXPECT_LT(c.stat, c.critical);
}

TEST(MtpDrafter, SamplingKeepsTheTargetDistribution) {
    expect_mtp_sampling_exact("rand-qwen35-mtp1-tok512-d128-l4-F16.gguf");
    expect_mtp_sampling_exact("rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf");
}

// The head blind to the target's constraints: forwards everything but the guide.
class BlindDrafter final : public Drafter {
  public:
    explicit BlindDrafter(Drafter& inner) : inner_(inner) {}
    const char* name() const override { return inner_.name(); }
    void attach(Session* target) override { inner_.attach(target); }
    void begin(std::span<const token_id> prompt) override { inner_.begin(prompt); }
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override {
        return inner_.start(history, n_max, out);
    }
    std::span<const token_id> next(Draft& out) override { return inner_.next(out); }
    Session* head_session() override { return inner_.head_session(); }
    const float* head_hidden() const override { return inner_.head_hidden(); }
    int steps() const override { return inner_.steps(); }
    void accept(int n_kept) override { inner_.accept(n_kept); }

  private:
    Drafter& inner_;
};

// Under a JSON grammar and penalties, the head's drafts are guided by the target's constraints
// (Drafter::guide): greedy output equals plain decoding with the same constraints, and the
// guided head has more of its drafts kept than the same head blind to them.
TEST(MtpDrafter, GuidedByTheTargetsConstraints) {
    const auto m = Model::load(kDir + "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf");
    const auto vocab = GrammarVocab::from_tokenizer(m->tokenizer());
    const std::vector<token_id> prompt = test::random_tokens(8, 21);
    PenaltyParams pen;
    pen.repeat_penalty = 1.3f;
    pen.repeat_last_n = 32;
    const auto generate = [&](Drafter* d, SpecStats* st) {
        Session target(*m, params());
        Sampler sampler(greedy());
        Constraints c(pen, m->hparams().n_vocab, json_object_grammar(), vocab);
        GenParams gp;
        gp.n_predict = 48;
        gp.n_draft = 4;
        Generator gen(target, sampler, d, gp, nullptr, &c);
        *st = gen.generate(prompt);
        return gen.output();
    };
    SpecStats plain_st, guided_st, blind_st;
    const auto plain = generate(nullptr, &plain_st);
    ASSERT_GT(plain.size(), 4u);
    MtpDrafter head(*m, greedy());
    EXPECT_EQ(generate(&head, &guided_st), plain);
    MtpDrafter head2(*m, greedy());  // (a drafter keeps the guide it was last given)
    BlindDrafter blind(head2);
    EXPECT_EQ(generate(&blind, &blind_st), plain);
    std::printf("mtp under a JSON grammar: guided %ld of %ld kept, blind %ld of %ld\n",
                long(guided_st.n_accepted), long(guided_st.n_drafted), long(blind_st.n_accepted),
                long(blind_st.n_drafted));
    EXPECT_GT(guided_st.n_drafted, 0);
    EXPECT_GT(guided_st.accept_rate(), blind_st.accept_rate());
}

TEST(MtpDrafter, ModelWithoutTheHeadIsRefused) {
    const std::string path = kDir + "rand-qwen35-tok512-d128-l4-F16.gguf";
    const auto m = Model::load(path);
    SpeculativeFlags f;
    f.spec_type = "mtp";
    const SpeculativeConfig c = parse_speculative_flags(f);
    EXPECT_EQ(c.method, SpecMethod::mtp);
    try {
        load_speculative(c, *m);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << msg;
        EXPECT_NE(msg.find("qwen35.nextn_predict_layers"), std::string::npos) << msg;
    }
    EXPECT_THROW(MtpDrafter(*m, greedy()), Error);
    // llama.cpp's and vLLM's names; -md names an MTP sidecar (test_mtp_sidecar).
    f.spec_type = "draft-mtp";
    EXPECT_EQ(parse_speculative_flags(f).method, SpecMethod::mtp);
    SpeculativeFlags v;
    v.speculative_config = R"({"method": "mtp", "num_speculative_tokens": 2})";
    EXPECT_EQ(parse_speculative_flags(v).method, SpecMethod::mtp);
    f.model_draft = "x.gguf";
    EXPECT_EQ(parse_speculative_flags(f).method, SpecMethod::mtp);
    EXPECT_EQ(mtp_sidecar(parse_speculative_flags(f)), "x.gguf");
}

}  // namespace
