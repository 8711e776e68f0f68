// Eagle3Drafter: drafts with an EAGLE-3 head (eagle3_head.h, `--spec-type eagle3 -md HEAD.gguf`)
// from the hidden states the target keeps of its own passes (SessionParams::capture_layers =
// Eagle3Head::capture, Session::captured): no second target pass.
//
// Head position p takes [t_{p+1}, fc(features of target position p)] and predicts t_{p+2}, as the
// MTP head does (mtp_drafter.h). At each proposal the history is t_0 .. t_L (t_L the token the
// target evaluates next) and the target's last pass captured the rows of the positions it kept
// (a prompt pass's rows, or the verified [last, accepted drafts]). The head first takes, in one
// pass, every position it lacks up to L - 1 (their features through fc): the last row's logits
// give d_1. For k > 1 it chains on its own output: position L takes [d_1, the head's own pre-norm
// output], and so on. Afterwards the head's cache keeps positions up to L - 1 (verified tokens and
// the target's features only) and drops the chained ones. Its cache starts at the first position
// the target captured (a long prompt's last -ub pass); a gap (a plain step, a rollback) starts it
// anew there.
//
// The head's passes run in start() on the target session's pool (the drafter has no session of
// its own, so DraftBatch never evaluates for it): in a batched step each sequence's head runs in
// turn, with the drafts it would get alone. Greedy targets get greedy drafts; sampling targets
// draws from the head's distribution q; the target's constraints guide the rows (draft_chooser.h).
#pragma once

#include <memory>
#include <vector>

#include "sampling/constraints.h"
#include "speculative/drafters/draft_chooser.h"
#include "speculative/drafters/drafter.h"
#include "speculative/drafters/eagle3_head.h"

namespace specula {

class Eagle3Drafter final : public Drafter {
  public:
    // n_ctx: the head's cache (the target's context); its KV types; p_min: --draft-p-min (a row
    // whose top probability is below it ends the proposal).
    Eagle3Drafter(const Eagle3Head& head, const SamplingParams& sampling, int n_ctx,
                  KVType type_k = KVType::F32, KVType type_v = KVType::F32, float p_min = 0.0f);

    const char* name() const override { return "eagle3"; }
    // Error when the target session does not capture the layers the head reads.
    void attach(Session* target) override;
    void begin(std::span<const token_id> prompt) override {
        fresh_ = true;
        last_row_ = -1;
    }
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override;
    void accept(int n_kept) override { last_row_ = n_kept; }
    int steps() const override { return steps_; }

    const Eagle3State& state() const { return st_; }  // the head's last pass (tests)

  private:
    // feat_ = the features of positions pos .. L - 1 from the target's captured rows.
    void features(int pos, int L);
    void chain(int n_max, Draft& out, int keep);

    const Eagle3Head& head_;
    Session* target_ = nullptr;
    Eagle3State st_;
    DraftChooser chooser_;
    float p_min_ = 0.0f;
    bool fresh_ = true;
    int base_ = 0;       // the absolute position of the head's cache position 0
    int last_row_ = -1;  // the captured row of position L - 1 (-1: the last row)
    int steps_ = 0;
    std::vector<float> feat_, g_;
    std::vector<token_id> next_;
};

}  // namespace specula
