// The decoding loop of `specula run`: evaluate the prompt in one batch, then sample, hand each
// token to a sink and evaluate it, until the token budget, an end-of-generation token or a full
// context. Speculative decoding (a draft model proposing tokens the target verifies in one batch)
// is meant to plug in here as a second loop with the same limits, sink and statistics.
#pragma once

#include <functional>
#include <vector>

#include "model/model.h"
#include "sampling/sampler.h"

namespace specula::cli {

struct GenerateLimits {
    int n_predict = -1;  // -1: until end of generation or a full context
    bool ignore_eos = false;
};

struct GenerateStats {
    int n_prompt = 0;
    double prompt_ms = 0;  // the one batched eval of the prompt
    int n_generated = 0;   // tokens handed to the sink (an end-of-generation token is not)
    double gen_ms = 0;     // from the end of the prompt eval to the last token
    bool hit_eog = false;
    bool context_full = false;  // stopped because the context had no room for another eval
};

// Called with each generated token, in order, as soon as it is sampled.
using TokenSink = std::function<void(token_id)>;

// Plain autoregressive decoding. `prompt` must be non-empty and fit in the session's context.
GenerateStats generate_plain(Session& session, Sampler& sampler,
                             const std::vector<token_id>& prompt, const GenerateLimits& limits,
                             const TokenSink& sink);

}  // namespace specula::cli
