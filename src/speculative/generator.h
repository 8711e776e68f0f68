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

#include "model/model.h"
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

    // generate() that keeps the caches of the previous generate() / resume() (a conversation's
    // next turn): the target rolls back to the longest common prefix of `prompt` and the previous
    // history and evaluates only the rest, the drafter resumes (Drafter::resume) and the
    // constraints restart from `prompt` (they must hold no grammar). SpecStats::n_prompt counts
    // every prompt token, n_prompt_cached the ones reused from the cache.
    SpecStats resume(std::span<const token_id> prompt, const TokenCallback& on_token = {});

    const std::vector<token_id>& output() const { return output_; }    // generated tokens
    const std::vector<token_id>& history() const { return history_; }  // prompt + output

  private:
    SpecStats start(std::span<const token_id> prompt, bool reuse);
    SpecStats run(std::span<const token_id> prompt, bool reuse, const TokenCallback& on_token);
    const StepRecord& step(const TokenCallback& on_token);
    int draft_length() const;
    void propose(int n);
    Verdict verify_pass();
    void emit(EmittedToken t, const TokenCallback& on_token);

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
};

// Convenience: plain or speculative generation of a whole sequence, returning the generated ids.
std::vector<token_id> generate_tokens(Session& target, Sampler& sampler, Drafter* drafter,
                                      std::span<const token_id> prompt, const GenParams& params,
                                      SpecStats* stats = nullptr);

}  // namespace specula
