// Sequence: one generation as the engine (speculative/engine.h) steps it: what it runs with, set
// by its owner before Engine::start, and its state, which only the engine's steps change. Plain
// data: the CLI's one generation, a chat turn and each of the server's requests are one of these;
// per-sequence state that later drafters or architectures need lives here too.
#pragma once

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/session.h"
#include "sampling/constraints.h"
#include "sampling/sampler.h"
#include "speculative/draft_length/draft_length.h"
#include "speculative/draft_length/step_record.h"
#include "speculative/drafters/drafter.h"
#include "speculative/stats.h"
#include "speculative/verifier.h"

namespace specula {

struct GenParams {
    int n_predict = -1;              // -1: until end of generation or a full context
    bool ignore_eos = false;         // keep going past end-of-generation tokens (they are emitted)
    int n_draft = 4;                 // fixed draft length (--draft N); 0: plain decoding
    int draft_min = 0;               // --draft-min: a proposal shorter than this is not verified
    double synthetic_accept = -1.0;  // bench only: accept each draft token with this probability
    // Grammar-forced drafts (speculative/drafters/forced_drafts.h): up to this many per step when
    // the sequence has no drafter or its draft length is 0, the draft length otherwise; 0: none.
    int n_forced = 8;
    // Record the draft trace in SpecStats::trace (speculative/draft_trace.h): one entry per step.
    bool trace = false;
};

// Called with each generated token and whether it was an accepted draft token (false: the
// target's own); return false to stop.
using TokenCallback = std::function<bool(token_id, bool drafted)>;

// Called for each generated token just before the TokenCallback, with the target's logit row the
// token was chosen from, after the Constraints (n_vocab values; valid only during the call). The
// row is the same with and without speculation (batch invariance), so whatever is computed from
// it, e.g. logprobs, is too.
using RowObserver = std::function<void(token_id, const float* row)>;

struct Sequence {
    // What it runs with; not owned, all outlive the generation.
    Session* target = nullptr;
    Sampler* sampler = nullptr;
    Drafter* drafter = nullptr;          // null: plain decoding
    Constraints* constraints = nullptr;  // logit bias, penalties, grammar; null: none. It must
                                         // hold no history: start() pushes the prompt
    // --draft auto: chooses each step's draft length and learns from each step (params.n_draft
    // is then unused). With by_load, the engine's step chooses one length for all such sequences
    // of the step from the load (speculative/draft_length/load_draft.h) instead.
    DraftLengthController* auto_length = nullptr;
    bool by_load = false;
    GenParams params;
    TokenCallback on_token;  // may be empty
    RowObserver on_row;      // may be empty

    // State (read it; only the engine changes it).
    std::vector<token_id> history;  // prompt + output
    std::vector<token_id> output;   // generated tokens
    int n_prompt = 0;
    bool decoding = false;  // the target holds the prompt but its last token
    SpecStats stats;        // stats.stop_reason is set once the generation has stopped
    StepRecord rec;         // the last decoding step

    bool done() const { return !stats.stop_reason.empty(); }

    // The step's working set, sized at start() so that a running loop does not allocate.
    struct Work {
        Draft draft;
        std::vector<token_id> batch;  // [last, drafts...]
        std::vector<const float*> rows;
        std::vector<std::vector<float>> constrained;  // one constrained row per batch position
        std::unique_ptr<VerifyScratch> scratch;
        std::mt19937_64 synthetic_rng;
        int n_past = 0;   // the target's n_past() when the step was planned
        int n_draft = 0;  // this step's draft budget
        int n_own = 0;    // draft tokens from the drafter (the rest of the draft is forced)
        std::string forced_bytes;             // forced drafts' scratch
        std::vector<token_id> forced_tokens;  // ...
        clock_type::time_point t_start, t_gen;
    } work;
};

}  // namespace specula
