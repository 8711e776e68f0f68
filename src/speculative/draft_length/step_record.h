// StepRecord: what one step of the generation loop did (speculative/generator.h). The loop
// returns it; the statistics (SpecStats::add) and the adaptive draft length
// (DraftLengthController::observe) both learn from it, and nothing else.
#pragma once

#include <vector>

#include "tokenizer/tokenizer.h"

namespace specula {

struct EmittedToken {
    token_id id = -1;
    bool drafted = false;  // an accepted draft token (false: the target's own token)
};

struct StepRecord {
    int n_drafted = 0;      // draft tokens the target verified (0: a plain pass)
    int n_accepted = 0;     // ... and accepted
    int n_draft_steps = 0;  // draft-model evaluations spent proposing
    // Of the drafted tokens, the last n_forced are grammar-forced
    // (speculative/drafters/forced_drafts.h), not the drafter's; n_forced_accepted of them were
    // accepted.
    int n_forced = 0;
    int n_forced_accepted = 0;
    // Tokens emitted by this step, in order: accepted drafts, then the target's own token. Fewer
    // when generation stops inside the step (an end-of-generation token is not emitted).
    std::vector<EmittedToken> emitted;
    const char* stop = nullptr;  // why generation stops after this step, or null
    double draft_ms = 0;         // proposing
    double verify_ms = 0;        // the target pass
    double sample_ms = 0;        // the accept/reject decision and the drafter's bookkeeping
};

}  // namespace specula
