// MtpDrafter: self-speculation with the target model's own MTP (nextn) head (model/load/weights.h's
// MtpWeights, Session::eval_mtp). No second model: the head runs on the target's Session, from
// the target's final hidden states.
//
// MTP position p holds [t_{p+1}, h_p]; its logits predict t_{p+2}. At each proposal the history
// is t_0 .. t_L (t_L the token the target evaluates next) and the target's last pass left h_p for
// the positions it kept (the prompt's last one, or the verified [last, accepted drafts]). The head
// first takes, in one pass, every position it lacks up to L - 1: the last row's logits give d_1.
// For k > 1 it chains on its own output: position L takes [d_1, the head's own hidden output],
// and so on. Afterwards the head's cache keeps positions up to L - 1 (built from verified tokens
// and the target's hidden states only) and drops the chained ones.
//
// Each of those head passes is one round of the drafter protocol (drafter.h): start() returns the
// first pass's tokens, next() chooses from the head's last row and returns the chained token;
// head_session() is the target's Session, so that the engine evaluates the head rows of every
// sequence of a step in one head pass (DraftBatch, BatchEvaluator::eval_mtp), with the same
// drafts as each alone.
//
// The head's cache starts at the first position whose hidden state the target left (the prompt's
// last one: the target evaluates prompts without keeping every row's hidden state); rope depends
// on relative positions only, so this is the head attending to the generation from there on.
// Greedy targets get greedy drafts (q one-hot); sampling targets get draws from the head's
// transformed distribution q. The target's constraints (Drafter::guide: penalties, logit bias,
// a grammar) shape the head's rows as they shape the target's, so that guided drafts are the
// ones verification can keep; verification stays exact either way.
#pragma once

#include <vector>

#include "sampling/constraints.h"
#include "sampling/sampler.h"
#include "speculative/drafters/draft_chooser.h"
#include "speculative/drafters/drafter.h"

namespace specula {

class Model;

class MtpDrafter final : public Drafter {
  public:
    // `model` must have an MTP head (Model::has_mtp), else an Error naming its file.
    MtpDrafter(const Model& model, const SamplingParams& sampling);

    const char* name() const override { return "mtp"; }
    void attach(Session* target) override { target_ = target; }
    void begin(std::span<const token_id> prompt) override {
        fresh_ = true;
        last_row_ = -1;
    }
    // The rounds run the target Session's head (session() stays null: no session of its own).
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override;
    std::span<const token_id> next(Draft& out) override;
    Session* head_session() override { return target_; }
    const float* head_hidden() const override { return hidden_.data(); }
    void accept(int n_kept) override { last_row_ = n_kept; }
    // Head passes of the last proposal.
    int steps() const override { return steps_; }

  private:
    std::span<const token_id> finish();  // ends a proposal that ran head passes

    const Model& model_;
    Session* target_ = nullptr;
    DraftChooser chooser_;
    bool fresh_ = true;  // a new generation: the head's cache starts anew
    int base_ = 0;       // the absolute position of the head's cache position 0
    int last_row_ = -1;  // the target's hidden row of position L - 1 (-1: its last row)
    int steps_ = 0;
    // The proposal in progress: its length bound, the head's cache length to keep afterwards
    // (positions up to L - 1) and the head row the next choice reads.
    int n_max_ = 0, keep_ = 0, row_ = 0;
    std::vector<token_id> next_;        // the tokens of the head's pass
    std::vector<float> hidden_;         // and their hidden rows
    Constraints* guide_now_ = nullptr;  // guide_ during a proposal
    Constraints::Mark mark_;            // guide_now_'s state before it
};

}  // namespace specula
