// Statistics of one generation (plain or speculative), like vLLM's spec-decode metrics:
// throughput, drafts, acceptance (overall, per draft position, mean tokens per target pass),
// where the time went (draft / verify / sampling) and the measured draft-to-target cost ratio.
// print() writes short summary lines (for stderr); to_json() feeds --stats-json.
#pragma once

#include <cstdio>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "speculative/draft_length/step_record.h"
#include "speculative/draft_trace.h"

namespace specula {

struct SpecStats {
    std::string drafter;      // "" for plain generation
    bool synthetic = false;   // acceptance forced by --synthetic-acceptance (bench only)
    std::string stop_reason;  // "eog", "n_predict", "context", "callback"

    // The prompt pass evaluates all prompt tokens but the last (which goes with the first draft)
    // in the target, and the same in the draft model.
    int n_prompt = 0;
    int n_prompt_cached = 0;  // prompt tokens already in the cache (Generator::resume)
    double t_prompt_ms = 0;
    int n_generated = 0;
    double t_gen_ms = 0;

    int n_target_passes = 0;  // target evals during generation
    int n_drafts = 0;         // passes that verified a non-empty draft
    long n_drafted = 0;       // draft tokens proposed
    long n_accepted = 0;      // draft tokens kept
    long n_draft_steps = 0;   // draft model evaluations
    // Of n_drafted / n_accepted: grammar-forced draft tokens
    // (speculative/drafters/forced_drafts.h), proposed without a drafter's help.
    long n_forced = 0;
    long n_forced_accepted = 0;
    std::vector<long> pos_reached;   // [i]: drafts whose position i+1 was verified
    std::vector<long> pos_accepted;  // [i]: ... and accepted there

    double t_draft_ms = 0;   // proposing (draft model / lookup)
    double t_verify_ms = 0;  // target passes
    double t_sample_ms = 0;  // accept/reject decisions and sampling
    // What a one-token target pass (a plain decoding step) costs, read from the engine's pass-cost
    // model (speculative/draft_length/pass_cost.h) when the generation ends: measured if such
    // passes ran, else estimated from the passes that did. 0 without passes.
    double plain_pass_ms = 0;
    // One entry per decoding step when GenParams::trace is on (speculative/draft_trace.h); empty
    // otherwise. Not part of to_json().
    std::vector<DraftTraceStep> trace;

    // Counts one step of the generation loop.
    void add(const StepRecord& step);

    double prompt_tps() const {
        return t_prompt_ms > 0 ? (n_prompt - n_prompt_cached) * 1e3 / t_prompt_ms : 0;
    }
    double gen_tps() const { return t_gen_ms > 0 ? n_generated * 1e3 / t_gen_ms : 0; }
    double accept_rate() const { return n_drafted ? double(n_accepted) / n_drafted : 0; }
    // Tokens produced per target pass (accepted drafts + the target's own token).
    double mean_accept_len() const {
        return n_target_passes ? double(n_accepted + n_target_passes) / n_target_passes : 0;
    }
    // Acceptance at draft position i (1-based) given positions before it were accepted.
    double pos_accept_rate(int i) const;
    double draft_step_ms() const { return n_draft_steps ? t_draft_ms / n_draft_steps : 0; }
    double target_pass_ms() const { return n_target_passes ? t_verify_ms / n_target_passes : 0; }
    // Measured cost of one draft step relative to one target pass.
    double cost_ratio() const {
        return target_pass_ms() > 0 ? draft_step_ms() / target_pass_ms() : 0;
    }

    void print(std::FILE* out) const;
    // The drafting lines of print() alone (nothing for plain generation without forced drafts).
    void print_speculative(std::FILE* out) const;
    nlohmann::json to_json() const;
};

}  // namespace specula
