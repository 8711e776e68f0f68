// DFlashDrafter: drafts a whole block with a DFlash drafter (dflash_head.h, `--spec-type dflash
// -md DRAFT.gguf`) in ONE pass, from the target's features at the layers the drafter names, which
// the target's sessions keep of their own passes (SessionParams::capture_layers =
// DFlashHead::capture, Session::captured): no second target pass.
//
// At each proposal the history is t_0 .. t_L (t_L the token the target evaluates next) and the
// target's last pass captured the rows of the positions it kept (a prompt pass's rows, or the
// verified [last, accepted drafts]). The drafter first adds every position it lacks up to L - 1 to
// its context (their features through dflash_fc into each layer's keys and values), then runs the
// block [t_L, mask x K] at positions L .. L + K, K = min(n_max, block_size - 1): mask row i's
// logits propose d_{i+1}. The block's rows never stay in its cache. The context starts at the first
// position the target captured (a long prompt's last -ub pass); a gap (a plain step, a rollback)
// starts it anew there.
//
// The pass runs in start() on the target session's pool (the drafter has no session of its own,
// so DraftBatch never evaluates for it): in a batched step each sequence's drafter runs in turn,
// with the drafts it would get alone. Greedy targets get greedy drafts; sampling targets draw each
// row from the drafter's distribution q; the target's constraints guide the rows in order
// (draft_chooser.h).
#pragma once

#include <vector>

#include "sampling/constraints.h"
#include "speculative/drafters/dflash_head.h"
#include "speculative/drafters/draft_chooser.h"
#include "speculative/drafters/drafter.h"

namespace specula {

class DFlashDrafter final : public Drafter {
  public:
    // n_ctx: the target's context (0: its training context); the cache holds it plus a block.
    // type_k / type_v: the cache's types; p_min: --draft-p-min (a row whose top probability is
    // below it ends the proposal).
    DFlashDrafter(const DFlashHead& head, const SamplingParams& sampling, int n_ctx,
                  KVType type_k = KVType::F32, KVType type_v = KVType::F32, float p_min = 0.0f);

    const char* name() const override { return "dflash"; }
    // Error when the target session does not capture the layers the drafter reads.
    void attach(Session* target) override;
    void begin(std::span<const token_id> prompt) override {
        fresh_ = true;
        last_row_ = -1;
    }
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override;
    void accept(int n_kept) override { last_row_ = n_kept; }
    int steps() const override { return steps_; }

    const DFlashState& state() const { return st_; }  // the last block's logits (tests)

  private:
    // feat_ = the features of positions pos .. L - 1 from the target's captured rows.
    void features(int pos, int L);
    void choose(int n, Draft& out);

    const DFlashHead& head_;
    Session* target_ = nullptr;
    DFlashState st_;
    DraftChooser chooser_;
    float p_min_ = 0.0f;
    bool fresh_ = true;
    int base_ = 0;       // the absolute position of the cache's row 0
    int last_row_ = -1;  // the captured row of position L - 1 (-1: the last row)
    int steps_ = 0;
    std::vector<float> feat_;
};

}  // namespace specula
