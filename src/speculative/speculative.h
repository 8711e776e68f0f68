// Entry points for the CLI: turn `run` flags (-md FILE, --draft N|auto, --draft-p-min P,
// --lookup) into a ready drafter (draft model loaded and its vocabulary checked against the
// target) and GenParams for speculative/generator.h.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "speculative/drafter.h"
#include "speculative/generator.h"
#include "speculative/ngram_drafter.h"

namespace specula {

struct DraftOptions {
    std::string draft_model;  // -md FILE; "" = no draft model
    bool lookup = false;      // --lookup: n-gram prompt-lookup drafting (no draft model needed)
    NgramParams ngram;        // --lookup-ngram-min / --lookup-ngram-max
    float p_min = 0.0f;       // --draft-p-min
    int n_ctx = 0;            // draft context; 0: the draft model's training context
    int n_threads = 0;        // 0: hardware concurrency
};

struct SpeculativeSetup {
    std::unique_ptr<Model> draft_model;  // null unless -md
    std::unique_ptr<Drafter> drafter;    // null: plain decoding
};

// Loads the draft model (if any), checks its vocabulary against the target's (Error naming the
// first difference) and builds the drafter. -md and --lookup together is an Error.
SpeculativeSetup make_drafter(const Model& target, const DraftOptions& opts,
                              const SamplingParams& sampling);

// Parses --draft: "auto" or a length 0..64 into params (Error otherwise).
void parse_draft_length(const std::string& value, GenParams& params);

}  // namespace specula
