// Engine: THE step of generation, for one sequence or many (speculative/sequence.h). `specula
// run`, `chat` and `bench` step a batch of one; `specula serve` steps every request that holds a
// slot. One step:
//
//   1. prompt chunks for the sequences still prefilling (at most StepLimits::prefill_tokens over
//      all of them, shortest remaining prompt first, so a long prompt never stalls the others;
//      prefill_tokens_idle for a lone prompt, when nothing decodes);
//   2. drafts for every decoding sequence with a drafter: the drafters' rounds evaluated together,
//      one draft-model pass (MTP drafters: one head pass) per round for all of them
//      (speculative/drafters/draft_batch.h); then, under a grammar, the tokens it forces after each
//      draft (speculative/drafters/forced_drafts.h), also for a sequence without a drafter;
//   3. ONE target pass over all of it (model/batch_eval.h): [last, drafts...] per decoding
//      sequence, all logits; prompt chunks, last logits only;
//   4. per decoding sequence: the constraints reshape its rows, the verifier (a pure function of
//      the rows, speculative/verifier.h) keeps the longest agreeing prefix of its draft plus one
//      token of the target's own, the target and the drafter roll back past the rejected drafts,
//      and the tokens are emitted one by one (Sequence::on_token; an end-of-generation token stops
//      it and is not emitted unless ignore_eos).
//
// Every sequence's logits are those of evaluating it alone (batch invariance), so its greedy
// output is the same whatever shares its steps, and equal to plain decoding's; with sampling,
// rejection sampling keeps the target's distribution exactly. Constraints are applied position
// by position: the row that checks draft token i sees the history INCLUDING drafts 0..i-1.
//
// The engine measures every pass once into its PassCost, which the draft-length controllers, the
// draft length by load, the statistics and (under --draft auto) a drafter that chooses its draft
// source by cost (Drafter::costs) read. A running step does not allocate (after warm-up).
#pragma once

#include <climits>
#include <memory>
#include <span>
#include <vector>

#include "model/batch_eval.h"
#include "speculative/draft_length/load_draft.h"
#include "speculative/draft_length/pass_cost.h"
#include "speculative/drafters/draft_batch.h"
#include "speculative/sequence.h"

namespace specula {

struct StepLimits {
    int prefill_tokens = INT_MAX;  // prompt tokens evaluated per step, over all prefilling ones
    // ... in a step with one prompt and nothing decoding (nobody waits on the pass), when more.
    int prefill_tokens_idle = 0;
};

// What one step did (for metrics and tests).
struct StepReport {
    int n_items = 0;       // sequences in the target pass
    int rows = 0;          // tokens in the target pass
    double pass_ms = 0;    // the target pass
    int k_load = -1;       // the draft length chosen by load this step (-1: none)
    int draft_rounds = 0;  // draft passes (rounds that evaluated anything; MTP head passes too)
    int draft_seqs = 0;    // draft evaluations summed over the sequences
    double draft_ms = 0;   // drafting, all sequences
    bool decoded = false;  // some sequence decoded (else prompt chunks only)
};

class Engine {
  public:
    // `pool` is the one the sequences' sessions (targets and draft models) were built over; it
    // runs the passes over several of them. Null: one sequence per step, each session on its own.
    explicit Engine(const Model& target, ThreadPool* pool = nullptr,
                    const LoadDraftParams& load = {});
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Begins `seq` on `prompt`. With reuse_cache its target keeps the longest prefix its cache
    // shares with the prompt (Session::common_prefix: a conversation's previous turn, a slot's
    // last request; at most prompt.size() - 1 tokens) and drops the rest; without, it starts
    // empty. The drafter begins anew (nothing kept) or resumes; the constraints take the prompt.
    // Throws Error when the prompt is empty or does not fit the context, or the parameters are
    // out of range.
    void start(Sequence& seq, std::span<const token_id> prompt, bool reuse_cache = false);

    // Continues `seq` (started, not done) on its target session, which may be another one now or
    // may have lost its rows: the server preempts a request when its KV pool runs out
    // (server/serving/scheduler.h) and resumes it later, perhaps on another slot. The target keeps
    // the longest prefix its cache shares with the history and evaluates the rest as a prompt; the
    // output, statistics, sampler and constraints go on as they were, so greedy output is the
    // same as without the pause. The drafter begins anew on the history (or resumes on what its
    // session shares). Throws Error when the history no longer fits the target's context.
    void resume(Sequence& seq);

    // One step over `seqs` (see the top of this file); sequences already done are skipped, and a
    // sequence that reaches n_predict or a full context is marked done before its step.
    StepReport step(std::span<Sequence* const> seqs, const StepLimits& limits = {});

    // Ends `seq`: its target keeps all of the history but its last token (what a caller that
    // continues, e.g. the next turn, starts from), its times and plain_pass_ms are final, and
    // stats.stop_reason is `why` when it had none.
    void finish(Sequence& seq, const char* why = "callback");

    const PassCost& pass_cost() const { return cost_; }
    const Model& target() const { return target_; }

  private:
    void bind(Sequence& s, int keep);
    int draft_length(const Sequence& s, int k_load) const;
    int choose_by_load(int prefill_rows);
    void draft(StepReport& report, int k_load);
    void propose(StepReport& report);
    void eval_target();
    void verify_step(Sequence& s, double pass_ms);
    Verdict verdict(Sequence& s);
    void emit(Sequence& s, EmittedToken t, int row);

    const Model& target_;
    ThreadPool* pool_;
    PassCost cost_;
    LoadDraftLength load_;
    LoadDraftParams load_params_;
    std::unique_ptr<BatchEvaluator> batch_;  // the target's passes over several sequences
    DraftBatch drafts_;
    // The step's working lists (kept: a running step does not allocate).
    std::vector<Sequence*> prefilling_, decoding_;
    std::vector<BatchItem> items_;
    std::vector<Sequence*> item_owner_;
    std::vector<DraftJob> draft_jobs_;
    std::vector<Sequence*> draft_owner_;
    std::vector<const DraftLengthController*> ctl_;
};

}  // namespace specula
