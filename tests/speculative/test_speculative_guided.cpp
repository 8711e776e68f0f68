// A draft-model drafter guided by the target's Constraints (Drafter::guide): with a JSON grammar
// every proposed token is one the grammar allows after the tokens before it, sampled drafts come
// with q from the constrained distribution, and the guide's state is left as it was found.
// Unguided, the same drafter proposes tokens the grammar refuses (which verification rejects).
#include <gtest/gtest.h>

#include <cmath>

#include "model/load/model.h"
#include "sampling/constraints.h"
#include "sampling/json_grammar.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "test_util.h"

namespace specula {
namespace {

struct Fixture {
    std::unique_ptr<Model> draft =
        Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
    std::shared_ptr<const GrammarVocab> vocab = GrammarVocab::from_tokenizer(draft->tokenizer());
    std::vector<token_id> prompt = draft->tokenizer().encode("Once upon a time", true, true);

    Constraints json_constraints() const {
        return Constraints(PenaltyParams{}, draft->hparams().n_vocab, json_object_grammar(), vocab);
    }
};

// Whether the grammar accepts `tokens` one after another from `c`'s state (c is a copy).
bool grammar_accepts(Constraints c, const std::vector<token_id>& tokens) {
    for (token_id t : tokens)
        if (!c.accept(t)) return false;
    return true;
}

TEST(SpeculativeGuided, GuidedDraftsFollowTheGrammarAndLeaveItsState) {
    Fixture f;
    for (float temp : {0.f, 0.9f}) {
        DraftModelDrafter d(*f.draft,
                            DraftModelParams{256, 1, 0.f, SamplingParams{temp, 0, 1.f, 0.f, 7}});
        Constraints c = f.json_constraints();
        c.push_prompt(f.prompt);
        std::vector<token_id> history = f.prompt;
        d.guide(&c);
        d.begin(f.prompt);
        int proposed = 0;
        for (int step = 0; step < 8; ++step) {
            Draft out;
            const size_t before = c.penalties().size();
            d.propose(history, 6, out);
            EXPECT_EQ(c.penalties().size(), before) << "the guide's state is restored";
            ASSERT_TRUE(grammar_accepts(c, out.tokens)) << "temp " << temp << " step " << step;
            proposed += out.size();
            if (out.has_q) {
                ASSERT_GE(out.q.size(), out.tokens.size());
                for (int i = 0; i < out.size(); ++i) {
                    double sum = 0;
                    for (const TokenProb& tp : out.q[size_t(i)]) {
                        sum += tp.p;
                        Constraints probe = c;  // every token with q > 0 is allowed
                        for (int k = 0; k < i; ++k)
                            ASSERT_TRUE(probe.accept(out.tokens[size_t(k)]));
                        EXPECT_TRUE(probe.allows(tp.id));
                    }
                    EXPECT_NEAR(sum, 1.0, 1e-4);
                }
            }
            // Keep them all, the last one standing in for the target's own token: the history
            // grows by the whole proposal.
            if (out.size() == 0) break;
            for (token_id t : out.tokens) {
                ASSERT_TRUE(c.accept(t));
                history.push_back(t);
            }
            d.accept(out.size() - 1);
        }
        EXPECT_GT(proposed, 8) << "temp " << temp;
    }
}

TEST(SpeculativeGuided, UnguidedDraftsBreakTheGrammar) {
    Fixture f;
    DraftModelDrafter d(*f.draft,
                        DraftModelParams{256, 1, 0.f, SamplingParams{0.f, 0, 1.f, 0.f, 7}});
    Constraints c = f.json_constraints();
    d.begin(f.prompt);
    Draft out;
    d.propose(f.prompt, 6, out);
    ASSERT_GT(out.size(), 0);
    EXPECT_FALSE(grammar_accepts(c, out.tokens)) << "a story model does not start with JSON";
}

}  // namespace
}  // namespace specula
