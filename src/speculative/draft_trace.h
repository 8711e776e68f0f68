// The draft trace: what a drafter proposed at each step of one generation and how much of it the
// target kept, for a user (or a test) reading acceptance problems. The engine records one
// DraftTraceStep per decoding step when GenParams::trace is on (SpecStats::trace); `specula run
// --draft-trace FILE` writes them as JSON lines, and the server adds them to each choice as
// "speculative_trace" when a request asks ("speculative": {"trace": true}).
//
// One step's JSON: {"step": i, "pos": p, "drafter": name, "drafted": [ids], "accepted": n}, plus
// "forced": f when a grammar forced the last f of the drafted ids (speculative/drafters/
// forced_drafts.h). `step` counts the generation's decoding steps from 0 (a step without a draft
// has "drafted": []); `pos` is the position in the sequence (prompt + output) of the first drafted
// token, i.e. how many tokens precede it; `accepted` are kept from the front of `drafted`. The
// accepted counts sum to SpecStats::n_accepted, the drafted lists' lengths to n_drafted.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specula {

struct DraftTraceStep {
    int step = 0;
    int pos = 0;
    std::vector<token_id> drafted;  // verified draft tokens: the drafter's, then forced ones
    int accepted = 0;
    int forced = 0;  // the last `forced` of `drafted` were grammar-forced
};

// One step as the JSON object above.
nlohmann::json draft_trace_json(const DraftTraceStep& step, const std::string& drafter);

// Every step, as a JSON array of those objects.
nlohmann::json draft_trace_json(const std::vector<DraftTraceStep>& trace,
                                const std::string& drafter);

// Writes one JSON line per step to `path` (Error naming the file when it cannot be written).
void write_draft_trace(const std::string& path, const std::vector<DraftTraceStep>& trace,
                       const std::string& drafter);

}  // namespace specula
