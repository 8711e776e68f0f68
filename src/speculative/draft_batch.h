// DraftBatch: the draft model batched across sequences. Each draft step runs ONE pass of the
// draft model (model/batch_eval.h) over the pending tokens of every drafter still drafting, each
// drafter's Session keeping its own KV cache, instead of one pass per drafter. The server's
// scheduler drafts for all its decoding slots this way before their one target pass.
//
// Promise: every drafter proposes exactly what its own DraftModelDrafter::propose would (the
// draft model's logits for a sequence do not depend on what shares its pass, and each drafter
// chooses from its own rows with its own sampler and constraints), so greedy proposals, and
// therefore greedy output, are those of `specula run`.
#pragma once

#include <span>
#include <vector>

#include "model/batch_eval.h"
#include "speculative/draft_model_drafter.h"

namespace specula {

struct DraftJob {
    DraftModelDrafter* drafter = nullptr;  // distinct per job, all over the same draft model
    std::span<const token_id> history;     // prompt + accepted tokens (see Drafter::propose)
    int n_max = 0;
    Draft* out = nullptr;
    int steps = 0;  // out: draft-model evaluations spent (DraftModelDrafter::proposal_steps)
};

class DraftBatch {
  public:
    // `pool` is the one the drafters' sessions run on.
    DraftBatch(const Model& draft, ThreadPool& pool) : batch_(draft, pool) {}

    // Proposes for every job in lockstep; returns the number of draft passes run (the longest
    // proposal's steps).
    int propose(std::span<DraftJob> jobs);

  private:
    BatchEvaluator batch_;
    std::vector<BatchItem> items_;
    std::vector<DraftJob*> owner_;
};

}  // namespace specula
