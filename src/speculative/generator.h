// Generator: THE generation loop, for plain and speculative decoding alike (plain = no drafter or
// draft length 0). generate() evaluates the prompt and then repeats step() until it stops; each
// step the drafter proposes up to N tokens, the target evaluates [last, drafts] in one pass, the
// verifier (speculative/verifier.h, a pure function of that pass's logits) says how many drafts
// are accepted and gives the target's own token, the target's cache is rolled back past the
// rejected drafts, and the tokens are streamed through the callback one by one. The step's
// StepRecord feeds the statistics and the adaptive draft length. The Generator alone evaluates
// and rolls back the target.
//
// Constraints (sampling/constraints.h: logit bias, repetition / presence / frequency penalties, a
// grammar) reshape every target row before the verifier sees it, position by position: the row
// that checks draft token i is constrained by the history INCLUDING drafts 0..i-1 (mark / accept /
// rewind), so the verifier decides on exactly the distribution plain decoding would sample from.
// Greedy speculative output therefore equals plain output with the same constraints, and
// rejection sampling stays exact (it is exact for whatever q the drafter drew from; a drafter
// that sees the same constraints only accepts more).
//
// It stops at an end-of-generation token (not emitted, unless ignore_eos), after n_predict tokens,
// when the target's context is full, or when the callback returns false. Buffers are reserved up
// front: a running loop does not allocate.
#pragma once

#include <functional>
#include <random>
#include <span>
#include <vector>

#include "model/session.h"
#include "sampling/constraints.h"
#include "sampling/sampler.h"
#include "speculative/draft_length.h"
#include "speculative/drafter.h"
#include "speculative/stats.h"
#include "speculative/step_record.h"
#include "speculative/verifier.h"

namespace specula {

struct GenParams {
    int n_predict = -1;              // -1: until end of generation or a full context
    bool ignore_eos = false;         // keep going past end-of-generation tokens (they are emitted)
    int n_draft = 4;                 // fixed draft length (--draft N); 0: plain decoding
    int draft_min = 0;               // --draft-min: a proposal shorter than this is not verified
    double synthetic_accept = -1.0;  // bench only: accept each draft token with this probability
};

// Called with each generated token and whether it was an accepted draft token (false: the
// target's own); return false to stop.
using TokenCallback = std::function<bool(token_id, bool drafted)>;

// Called for each generated token just before the TokenCallback, with the target's logit row the
// token was chosen from, after the Constraints (n_vocab values; valid only during the call). The
// row is the same with and without speculation (batch invariance), so whatever is computed from
// it, e.g. logprobs, is too.
using RowObserver = std::function<void(token_id, const float* row)>;

class Generator {
  public:
    // `drafter` may be null (plain decoding). `auto_length`, when given, chooses the draft length
    // of every step (--draft auto; params.n_draft is then unused) and learns from each step; the
    // caller owns it and may keep it across generations. Everything passed in must outlive the
    // Generator.
    // `constraints`, when given, must hold no history yet: generate() pushes the prompt into it
    // and accepts every emitted token; the caller owns it.
    Generator(Session& target, Sampler& sampler, Drafter* drafter, const GenParams& params,
              DraftLengthController* auto_length = nullptr, Constraints* constraints = nullptr);

    // Starts from an empty target cache, evaluates the prompt (all but its last token, which the
    // first step evaluates with the first draft), then steps until generation stops. Throws Error
    // when the prompt is empty or does not fit the context.
    SpecStats generate(std::span<const token_id> prompt, const TokenCallback& on_token = {});

    // The same loop in phases, for a caller that evaluates the target itself (the server's
    // scheduler runs the target passes of many generators as one, model/batch_eval.h):
    //   begin(prompt)       checks the prompt and makes it the history; evaluates nothing. The
    //                       caller then brings the target to hold prompt[0, n-1) (in chunks, or
    //                       keeping a prefix it already holds) and the drafter needs no begin()
    //                       (drafters follow the history they are given).
    //   stop_before_step()  why no step may run now ("n_predict", "context"), or null
    //   plan_step(k)        proposes drafts (k >= 0: up to k); returns [last, drafts...]: the
    //   target must evaluate
    //                       them at its n_past() with all logits before finish_step()
    //   finish_step(cb, ms) verifies from the target's rows, rolls it back, emits; `ms` is the
    //                       pass's time (StepRecord::verify_ms). The record feeds SpecStats::add
    //                       and the draft-length controller as in generate().
    //   end()               rolls the target back to hold all of history but its last token.
    // step() is plan_step + target.eval + finish_step, so both ways emit the same tokens.
    SpecStats begin(std::span<const token_id> prompt) { return start(prompt, false, false); }
    const char* stop_before_step() const;
    // n_draft >= 0 overrides this step's draft length (the scheduler's choice by load).
    std::span<const token_id> plan_step(int n_draft = -1);
    const StepRecord& finish_step(const TokenCallback& on_token, double verify_ms);
    void end();
    // For a caller that drafts for many generators at once (speculative/draft_batch.h: one draft
    // pass per draft step for all of them): draft_budget(k) is how many tokens plan_step(k) would
    // ask the drafter for (0: none), and plan_step_drafted() is plan_step(k) with that proposal
    // already made by drafter() for history() into proposal(), in `steps` draft evaluations
    // taking `ms`. Both ways verify the same drafts.
    int draft_budget(int n_draft = -1) const;
    Drafter* drafter() const { return drafter_; }
    Draft& proposal() { return draft_; }
    std::span<const token_id> plan_step_drafted(int steps, double ms);
    // Optional; set before generate().
    void observe_rows(RowObserver observer) { row_observer_ = std::move(observer); }
    // generate() that keeps the caches of the previous generate() / resume() (a conversation's
    // next turn): the target rolls back to the longest common prefix of `prompt` and the previous
    // history and evaluates only the rest, the drafter resumes (Drafter::resume) and the
    // constraints restart from `prompt` (they must hold no grammar). SpecStats::n_prompt counts
    // every prompt token, n_prompt_cached the ones reused from the cache.
    SpecStats resume(std::span<const token_id> prompt, const TokenCallback& on_token = {});

    const std::vector<token_id>& output() const { return output_; }    // generated tokens
    const std::vector<token_id>& history() const { return history_; }  // prompt + output

  private:
    SpecStats start(std::span<const token_id> prompt, bool evaluate, bool reuse);
    SpecStats run(std::span<const token_id> prompt, bool reuse, const TokenCallback& on_token);
    const StepRecord& step(const TokenCallback& on_token);
    int draft_length() const;
    void propose(int n);
    void trim_draft(int n);
    void reset_record();
    std::span<const token_id> step_batch();
    Verdict verify_pass();
    // `row`: the index in rows_ of the logit row that chose the token.
    void emit(EmittedToken t, int row, const TokenCallback& on_token);

    Session& target_;
    Sampler& sampler_;
    Drafter* drafter_;
    GenParams params_;
    DraftLengthController* auto_length_;
    Constraints* constraints_;
    std::vector<std::vector<float>> constrained_;  // one constrained row per batch position
    std::mt19937_64 synthetic_rng_;
    VerifyScratch scratch_;
    Draft draft_;
    StepRecord rec_;
    std::vector<token_id> batch_, history_, output_;
    std::vector<const float*> rows_;
    int step_n_past_ = 0;  // the target's n_past() when plan_step() planned the current step
    RowObserver row_observer_;
};

// Convenience: plain or speculative generation of a whole sequence, returning the generated ids.
std::vector<token_id> generate_tokens(Session& target, Sampler& sampler, Drafter* drafter,
                                      std::span<const token_id> prompt, const GenParams& params,
                                      SpecStats* stats = nullptr);

}  // namespace specula
