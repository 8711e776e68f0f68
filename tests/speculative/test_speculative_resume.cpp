// Generator::resume (a conversation's next turn, `specula chat`): only the tokens past the prefix
// the caches share with the new prompt are evaluated, and the output is what a fresh generate()
// of the whole prompt gives, token for token: plain and with a draft model, greedy, with
// penalties on, for a prompt that extends the history and for one that leaves it part-way.
// Engine::resume (the server's preemption): a generation whose target loses its rows part-way,
// or moves to another session, goes on to the output of an uninterrupted one.
#include <gtest/gtest.h>

#include <memory>

#include "model/session.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/engine.h"
#include "speculative/generator.h"
#include "test_util.h"

using namespace specula;

namespace {

SamplingParams greedy() {
    SamplingParams p;
    p.temp = 0.f;
    return p;
}

// A greedy drafter over `draft` on one thread (null: none).
std::unique_ptr<DraftModelDrafter> greedy_drafter(const Model* draft) {
    if (!draft) return nullptr;
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling = greedy();
    return std::make_unique<DraftModelDrafter>(*draft, dp);
}

// One target session, sampler, constraints and (optionally) draft model: what a chat keeps.
struct Chat {
    Chat(const Model& target, const Model* draft)
        : session(target, SessionParams{0, 1}),
          sampler(greedy()),
          constraints(PenaltyParams{1.3f, 32, 0.2f, 0.1f, {}}, target.hparams().n_vocab) {
        drafter = greedy_drafter(draft);
        GenParams gp;
        gp.n_predict = 24;
        gp.ignore_eos = true;
        gp.n_draft = 3;
        gen =
            std::make_unique<Generator>(session, sampler, drafter.get(), gp, nullptr, &constraints);
    }
    Session session;
    Sampler sampler;
    Constraints constraints;
    std::unique_ptr<DraftModelDrafter> drafter;
    std::unique_ptr<Generator> gen;
};

void check_resume(const Model& target, const Model* draft) {
    const std::vector<token_id> turn1 = {1, 403, 407, 261, 378};  // "Once upon a time" ids
    Chat chat(target, draft);
    chat.gen->generate(turn1);
    ASSERT_EQ(chat.gen->output().size(), 24u);

    // Next turn: the history plus new tokens. Only those (and the last reply token) are new.
    std::vector<token_id> turn2 = chat.gen->history();
    for (token_id t : {13, 450, 1095, 29892}) turn2.push_back(t % target.hparams().n_vocab);
    const SpecStats st2 = chat.gen->resume(turn2);
    EXPECT_EQ(st2.n_prompt, int(turn2.size()));
    EXPECT_EQ(st2.n_prompt_cached, int(turn1.size() + 24 - 1));
    if (draft) {
        // The draft model's cache kept the shared prefix too.
        EXPECT_GT(st2.n_drafted, 0);
    }

    Chat fresh(target, draft);
    fresh.gen->generate(turn2);
    EXPECT_EQ(chat.gen->output(), fresh.gen->output()) << "resumed turn differs from a fresh run";

    // A prompt that leaves the history after 7 tokens: the caches roll back to them.
    std::vector<token_id> turn3(chat.gen->history().begin(), chat.gen->history().begin() + 7);
    turn3.push_back(500 % target.hparams().n_vocab);
    turn3.push_back(42);
    const SpecStats st3 = chat.gen->resume(turn3);
    EXPECT_EQ(st3.n_prompt_cached, 7);
    Chat fresh3(target, draft);
    fresh3.gen->generate(turn3);
    EXPECT_EQ(chat.gen->output(), fresh3.gen->output());
}

// One generation stepped by an Engine: after step `cut` the target session is emptied (or, with
// `move`, a second session takes over) and the generation resumes; the output it returns.
std::vector<token_id> generate_preempted(const Model& target, const Model* draft, int cut,
                                         bool move) {
    Engine engine(target);
    Session first(target, SessionParams{0, 1}), second(target, SessionParams{0, 1});
    Sampler sampler(greedy());
    Constraints constraints(PenaltyParams{1.3f, 32, 0.2f, 0.1f, {}}, target.hparams().n_vocab);
    std::unique_ptr<DraftModelDrafter> drafter = greedy_drafter(draft);
    Sequence seq;
    seq.target = &first;
    seq.sampler = &sampler;
    seq.drafter = drafter.get();
    seq.constraints = &constraints;
    seq.params.n_predict = 40;
    seq.params.ignore_eos = true;
    seq.params.n_draft = 3;
    engine.start(seq, std::vector<token_id>{1, 403, 407, 261, 378});
    Sequence* batch[] = {&seq};
    for (int step = 0; !seq.done(); ++step) {
        if (step == cut) {
            if (move) {
                seq.target = &second;
            } else {
                first.reset();
            }
            seq.decoding = false;
            engine.resume(seq);
            EXPECT_EQ(seq.target->n_past(), 0);
        }
        engine.step(batch);
    }
    engine.finish(seq);
    return seq.output;
}

void check_preempt(const Model& target, const Model* draft) {
    const std::vector<token_id> whole = generate_preempted(target, draft, -1, false);
    ASSERT_EQ(whole.size(), 40u);
    for (int cut : {1, 3, 6})
        for (bool move : {false, true})
            EXPECT_EQ(generate_preempted(target, draft, cut, move), whole)
                << "preempted after step " << cut << (move ? ", moved" : ", emptied");
}

}  // namespace

TEST(SpecResume, PreemptedGenerationResumesToTheSameOutput) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    auto draft = Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
    check_preempt(*target, nullptr);
    check_preempt(*target, draft.get());
}

TEST(SpecResume, PlainEqualsFreshGeneration) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    check_resume(*target, nullptr);
}

TEST(SpecResume, DraftModelEqualsFreshGeneration) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    auto draft = Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
    check_resume(*target, draft.get());
}
