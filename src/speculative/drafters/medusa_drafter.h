// MedusaDrafter: drafts with Medusa heads (medusa_head.h) from the target's last hidden state, one
// token per head (head i's argmax for the token i + 1 places after the history's last), in one
// proposal without a model pass of its own. The hidden state is the target's final one (after its
// output norm, Session::hidden) at the position before the history's last token, from the
// target's last pass: the row of the last accepted draft (accept(n_kept): row n_kept), or after
// the prompt the pass's last row. Drafts are greedy (one-hot q); verification keeps sampling exact
// whatever they are. In a batched step (`serve`) the Medusa drafters of one set of heads propose
// together (Drafter::propose_joint): each head runs once over every slot's hidden row
// (medusa_draft_rows), with the drafts each slot would get alone.
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
    const void* joint_key() const override { return &heads_; }
    void propose_joint(std::span<DraftJob* const> jobs) override;

  private:
    // The target's hidden row this step drafts from; null: nothing to draft from.
    const float* hidden_row(int n_max) const;

    const MedusaHeads& heads_;
    Session* target_ = nullptr;
    MedusaState st_;
    // propose_joint's lists (kept: a running step does not allocate).
    std::vector<const float*> rows_;
    std::vector<int> ns_;
    std::vector<std::vector<token_id>*> outs_;
    int row_ = -1;  // the captured row to draft from; -1: the last pass's last row
};

}  // namespace specula
