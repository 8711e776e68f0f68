// Gemma4AssistantDrafter: drafts with Gemma 4's assistant (gemma4_assistant_head.h,
// `--spec-type gemma4-assistant -md ASSISTANT.gguf`, or `--spec-type mtp` with a gemma4_mtp /
// gemma4-assistant file) from the target's KV cache and its final hidden state: no cache and no
// second target pass of its own.
//
// At each proposal the history is t_0 .. t_L (t_L the token the target evaluates next; its cache
// holds positions 0 .. L - 1) and the target's last pass kept the final hidden state h_{L-1}
// (SessionParams::keep_hidden): the row of the last accepted draft (accept(n_kept): row n_kept),
// or after a prompt the pass's last row. Step 1 takes [t_L, h_{L-1}] and gives d_1; step k > 1
// takes [d_{k-1}, the assistant's own projected output of step k - 1]; every step sits at
// position L and reads the same target cache (ik_llama.cpp's constant draft positions). The
// steps run in start() on the target session's pool (DraftBatch never evaluates for it): in a
// batched step each sequence's assistant runs in turn, with the drafts it would get alone.
// Greedy targets get greedy drafts; sampling targets draw from the assistant's distribution q;
// the target's constraints guide the rows (draft_chooser.h).
#pragma once

#include "speculative/drafters/draft_chooser.h"
#include "speculative/drafters/drafter.h"
#include "speculative/drafters/gemma4_assistant_head.h"

namespace specula {

class Gemma4AssistantDrafter final : public Drafter {
  public:
    // p_min: --draft-p-min (a row whose top probability is below it ends the proposal).
    Gemma4AssistantDrafter(const Gemma4Assistant& assistant, const SamplingParams& sampling,
                           float p_min = 0.0f);

    const char* name() const override { return "gemma4-assistant"; }
    void attach(Session* target) override { target_ = target; }
    void begin(std::span<const token_id> prompt) override { row_ = -1; }
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override;
    void accept(int n_kept) override { row_ = n_kept; }
    int steps() const override { return steps_; }

    const Gemma4AssistantState& state() const { return st_; }  // the last step (tests)

  private:
    const Gemma4Assistant& a_;
    Session* target_ = nullptr;
    Gemma4AssistantState st_;
    DraftChooser chooser_;
    float p_min_ = 0.0f;
    int row_ = -1;  // the target's row of h_{L-1}; -1: the last pass's last row
    int steps_ = 0;
    std::vector<float> h_;
};

}  // namespace specula
