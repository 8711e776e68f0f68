// Generator: THE generation loop, for plain and speculative decoding alike (plain = no drafter or
// n_draft 0). Each step the drafter proposes up to N tokens, the target verifies [last, drafts]
// in one pass (speculative/verifier.h), and the accepted tokens plus the target's own token are
// streamed through the callback one by one. It stops at an end-of-generation token (not emitted,
// unless ignore_eos), after n_predict tokens, when the target's context is full, or when the
// callback returns false. Buffers are reserved up front: a running loop does not allocate.
#pragma once

#include <functional>
#include <random>
#include <span>
#include <vector>

#include "model/model.h"
#include "sampling/sampler.h"
#include "speculative/draft_length.h"
#include "speculative/drafter.h"
#include "speculative/stats.h"
#include "speculative/verifier.h"

namespace specula {

struct GenParams {
    int n_predict = -1;       // -1: until end of generation or a full context
    bool ignore_eos = false;  // keep going past end-of-generation tokens (they are emitted)
    int n_draft = 4;          // fixed draft length (--draft N); 0: plain decoding
    int draft_min = 0;        // --draft-min: a proposal shorter than this is not verified
    bool draft_auto = false;  // --draft auto: choose N per step (speculative/draft_length.h)
    DraftLengthParams auto_params;
    double synthetic_accept = -1.0;  // bench only: accept each draft token with this probability
};

// Called with each generated token; return false to stop.
using TokenCallback = std::function<bool(token_id)>;

class Generator {
  public:
    // `drafter` may be null (plain decoding). Target, sampler and drafter must outlive the
    // Generator.
    Generator(Session& target, Sampler& sampler, Drafter* drafter, const GenParams& params);

    // Starts from an empty target cache, evaluates the prompt (all but its last token, which the
    // first step evaluates with the first draft), then generates. Throws Error when the prompt is
    // empty or does not fit the context.
    SpecStats generate(std::span<const token_id> prompt, const TokenCallback& on_token = {});

    const std::vector<token_id>& output() const { return output_; }    // generated tokens
    const std::vector<token_id>& history() const { return history_; }  // prompt + output
    // The adaptive controller's state persists across generate() calls; it can also be carried
    // from one Generator to another (e.g. across requests) by copying it out and back in.
    const DraftLengthController& draft_length() const { return ctl_; }
    void set_draft_length(const DraftLengthController& ctl) { ctl_ = ctl; }

  private:
    int draft_length_for_step() const;
    Verdict verify_pass();
    bool emit(token_id tok, const TokenCallback& on_token, SpecStats& st);

    Session& target_;
    Sampler& sampler_;
    Drafter* drafter_;
    GenParams params_;
    DraftLengthController ctl_;
    std::mt19937_64 synthetic_rng_;
    VerifyScratch scratch_;
    Draft draft_;
    std::vector<token_id> batch_, history_, output_;
    std::vector<const float*> rows_;
};

// Convenience: plain or speculative generation of a whole sequence, returning the generated ids.
std::vector<token_id> generate_tokens(Session& target, Sampler& sampler, Drafter* drafter,
                                      std::span<const token_id> prompt, const GenParams& params,
                                      SpecStats* stats = nullptr);

}  // namespace specula
