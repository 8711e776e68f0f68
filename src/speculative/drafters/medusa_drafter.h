// MedusaDrafter: drafts with Medusa heads (medusa_head.h) from the target's last hidden state, one
// token per head (head i's argmax for the token i + 1 places after the history's last), in one
// proposal without a model pass of its own. The hidden state is the target's final one (after its
// output norm, Session::hidden) at the position before the history's last token, from the
// target's last pass: the row of the last accepted draft (accept(n_kept): row n_kept), or after
// the prompt the pass's last row. Drafts are greedy (one-hot q); verification keeps sampling exact
// whatever they are.
#pragma once

#include "speculative/drafters/drafter.h"
#include "speculative/drafters/medusa_head.h"

namespace specula {

class MedusaDrafter final : public Drafter {
  public:
    explicit MedusaDrafter(const MedusaHeads& heads) : heads_(heads) {}

    const char* name() const override { return "medusa"; }
    void attach(Session* target) override { target_ = target; }
    void begin(std::span<const token_id> prompt) override { row_ = -1; }
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override;
    void accept(int n_kept) override { row_ = n_kept; }

  private:
    const MedusaHeads& heads_;
    Session* target_ = nullptr;
    MedusaState st_;
    int row_ = -1;  // the captured row to draft from; -1: the last pass's last row
};

}  // namespace specula
