// DraftBatch: the proposals of many sequences' drafters, made together. Each round (see the
// protocol in speculative/drafters/drafter.h) evaluates every drafter still drafting: the sessions
// of one draft model in ONE pass (model/batch_eval.h), each keeping its own KV cache, instead of
// one pass per drafter; the MTP drafters' rows in ONE head pass of their target model
// (BatchEvaluator::eval_mtp). Drafters without a model finish in their first round. Drafters that
// share a Drafter::joint_key (Medusa's heads) propose together in one propose_joint() call.
//
// Promise: every drafter proposes exactly what its own Drafter::propose would (the draft model's
// logits for a sequence do not depend on what shares its pass, and each drafter chooses from its
// own rows with its own sampler and constraints), so greedy proposals, and therefore greedy
// output, do not depend on what else is drafted in the same step.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "model/batch_eval.h"
#include "speculative/drafters/drafter.h"

namespace specula {

struct DraftJob {
    Drafter* drafter = nullptr;         // distinct per job
    std::span<const token_id> history;  // prompt + accepted tokens (see Drafter::start)
    int n_max = 0;
    Draft* out = nullptr;
    int steps = 0;  // out: evaluations the proposal took (Drafter::steps)
};

class DraftBatch {
  public:
    // `pool` runs the passes over several sessions; it must be the one their sessions were built
    // over. Null: each session evaluates on its own (one job per step, the CLI's batch of one).
    explicit DraftBatch(ThreadPool* pool) : pool_(pool) {}

    // Proposes for every job in lockstep; returns the number of rounds that evaluated anything
    // (the longest proposal's steps).
    int propose(std::span<DraftJob> jobs);

  private:
    void eval_round();
    void eval_heads();
    BatchEvaluator& evaluator(const Model& m);
    void add(DraftJob& j, std::span<const token_id> todo);
    void propose_joint();

    ThreadPool* pool_;
    std::vector<std::unique_ptr<BatchEvaluator>> evals_;  // one per (draft or target) model met
    std::vector<BatchItem> items_, group_;                // a round's main-pass rows
    std::vector<MtpItem> heads_, head_group_;             // a round's MTP head rows
    std::vector<DraftJob*> owner_, head_owner_, round_;
    std::vector<DraftJob*> joint_, joint_group_;  // jobs whose drafters propose jointly
};

}  // namespace specula
