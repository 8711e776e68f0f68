// Drafters: cheap proposers of the next few tokens, checked afterwards by the target model.
//
// The engine (speculative/engine.h) owns each sequence's token history (prompt + accepted output)
// and its drafter. Each step it asks the drafter for up to n_max tokens continuing that history,
// lets the target verify them, and then tells the drafter how many of its tokens were kept. A
// drafter never sees tokens the target did not accept, so its own state (a draft model's KV
// cache) must follow the history exactly.
//
// A proposal runs in rounds so that the engine drafts for every sequence of a step at once: each
// round, every drafter that still drafts names the tokens its Session must evaluate, the engine
// evaluates all of those sessions of one model in ONE pass (model/batch_eval.h), and each drafter
// chooses from its own rows. A drafter without a model (n-gram lookup) proposes in its first
// round. A drafter built into the target (MTP) has its rounds evaluated by the target Session's
// MTP head (head_session()): the engine evaluates every such session's head rows of a round in
// ONE head pass (BatchEvaluator::eval_mtp). Every drafter speaks this protocol: the engine never
// needs to know which one it has.
#pragma once

#include <span>
#include <vector>

#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace specula {

class Constraints;
struct DraftJob;
class PassCost;
class Session;
struct StepRecord;

// One proposal: tokens d_1..d_n and, when drafting by sampling, the draft distribution q_i each
// d_i was drawn from (the same temp/top-k/top-p/min-p transforms as the target's sampler).
// Buffers keep their capacity between steps, so a running loop does not allocate.
struct Draft {
    std::vector<token_id> tokens;
    std::vector<std::vector<TokenProb>> q;  // q[i] for tokens[i]; unused when has_q is false
    bool has_q = false;                     // false: greedy / deterministic drafter (q = one-hot)

    int size() const { return static_cast<int>(tokens.size()); }
    void clear() { tokens.clear(); }  // q's inner vectors are reused, never freed
    // Slot for the distribution of the next token (tokens.size()), growing q when needed.
    std::vector<TokenProb>& next_q() {
        if (q.size() <= tokens.size()) q.resize(tokens.size() + 1);
        return q[tokens.size()];
    }
};

class Drafter {
  public:
    virtual ~Drafter() = default;
    virtual const char* name() const = 0;

    // The target Session this drafter drafts for (the engine sets it before begin / resume). A
    // drafter built into the target model (MTP) reads the target's hidden states and runs its
    // head there; the others ignore it.
    virtual void attach(Session* target) {}

    // A new sequence starts with `prompt` (the target has it, or is about to evaluate it).
    virtual void begin(std::span<const token_id> prompt) = 0;

    // A new sequence `prompt` that may share a prefix with the previous one (a conversation's
    // next turn): a drafter with a cache keeps the shared part. By default, begin().
    virtual void resume(std::span<const token_id> prompt) { begin(prompt); }

    // Starts a proposal of up to n_max tokens continuing `history` (prompt + every accepted token;
    // its last token is the one the target evaluates next) into `out`, and returns the tokens
    // session() must evaluate next (at its n_past(), the last row's logits only). next() is called
    // after that evaluation, chooses from its logits and returns the next tokens to evaluate. An
    // empty span ends the proposal (`out` holds it: possibly fewer tokens, or none). The spans
    // stay valid until the next call.
    virtual std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                            Draft& out) = 0;
    virtual std::span<const token_id> next(Draft& out) { return {}; }
    // Where a drafter's evaluations run (null: a drafter without a model of its own).
    virtual Session* session() { return nullptr; }
    // A drafter whose rounds run the target's MTP head instead (MtpDrafter): the Session whose
    // head evaluates the tokens start() / next() returned (Session::eval_mtp, all rows), each
    // token with its row of head_hidden() (valid until the next call). Null: session()'s main
    // pass evaluates them.
    virtual Session* head_session() { return nullptr; }
    virtual const float* head_hidden() const { return nullptr; }
    // Evaluations the last proposal took (0 without a model).
    virtual int steps() const { return 0; }

    // A whole proposal, its rounds evaluated one at a time here. Returns steps().
    int propose(std::span<const token_id> history, int n_max, Draft& out);

    // The target kept the first n_kept tokens of the last proposal and then appended its own
    // token (the correction or bonus); history grows by n_kept + 1. n_kept may exceed the
    // proposal's size: the engine drafted grammar-forced tokens after it (forced_drafts.h), the
    // first n_kept - size() of which were kept too (a drafter catches up on them in start()).
    virtual void accept(int n_kept) = 0;

    // The sequence ended (Engine::finish): `history` is its prompt (the first n_prompt tokens)
    // and everything it generated. A drafter that learns across requests (SuffixDrafter) keeps
    // the output; by default, nothing.
    virtual void end(std::span<const token_id> history, int n_prompt) {}

    // Optional (the engine sets it for each generation, null when there are none): the
    // target's Constraints (logit bias, penalties, grammar) at the current history. A drafter that
    // uses it masks its rows the same way before choosing, so it proposes only tokens a grammar
    // allows and draws from the constrained distribution (q); it leaves the state as it found it
    // (mark / accept / rewind). Verification stays exact either way; guided drafts are accepted
    // more often.
    void guide(Constraints* constraints) { guide_ = constraints; }

    // Optional (the engine sets it for each generation under --draft auto, null otherwise): the
    // engine's measured target-pass costs, valid while the generation runs, for a drafter that
    // chooses between its draft sources by cost (SuffixDrafter with a model,
    // speculative/draft_length/draft_source.h). After each such step, observe() gets what the
    // step did, with this drafter's own drafted / accepted counts (grammar-forced tokens left out)
    // and its draft time; by default, nothing. A drafter whose picks_length() is true then
    // chooses its own draft length too: the engine asks it for up to the length controller's
    // n_max (or the length by load, in `serve`), and it may propose nothing.
    void costs(const PassCost* target_costs) { costs_ = target_costs; }
    virtual void observe(const StepRecord& step) {}
    virtual bool picks_length() const { return false; }

    // A drafter whose whole proposal can run as one computation with other drafters' (Medusa's
    // heads: one matmul per head over every sequence's hidden row) returns a key that all the
    // drafters it can join share (null: none). DraftBatch (draft_batch.h) then proposes for all
    // the jobs of one key with ONE propose_joint() call on any of them instead of their start();
    // each job gets what its own drafter's start() would give it.
    virtual const void* joint_key() const { return nullptr; }
    virtual void propose_joint(std::span<DraftJob* const> jobs) {}

  protected:
    Constraints* guide_ = nullptr;
    const PassCost* costs_ = nullptr;
};

}  // namespace specula
