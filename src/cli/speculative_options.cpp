// add_speculative_options: see speculative_options.h.
#include "cli/speculative_options.h"

#include <CLI/CLI.hpp>

namespace specula::cli {

void add_speculative_options(CLI::App& cmd, SpeculativeFlags& f) {
    cmd.add_option("--model-draft,--md,--speculative-model", f.model_draft,
                   "-md: draft model for speculative decoding");
    cmd.add_option("--draft,--draft-max,--draft-n,--num-speculative-tokens", f.draft,
                   "tokens to draft per step: N, or auto (chosen per step)")
        ->capture_default_str();
    cmd.add_option("--draft-min", f.draft_min, "do not verify proposals shorter than this")
        ->capture_default_str();
    cmd.add_option("--draft-p-min", f.p_min,
                   "stop drafting when the draft's top probability falls below this")
        ->capture_default_str();
    cmd.add_option("--spec-type", f.spec_type,
                   "drafter: draft / draft_model (needs -md) or ngram (prompt lookup)");
    cmd.add_flag("--lookup", f.lookup, "n-gram prompt-lookup drafting (= --spec-type ngram)");
    cmd.add_option("--spec-ngram-min", f.ngram_min, "shortest n-gram to look up")
        ->capture_default_str();
    cmd.add_option("--spec-ngram-max", f.ngram_max, "longest n-gram to look up")
        ->capture_default_str();
    cmd.add_option("--speculative-config", f.speculative_config,
                   "vLLM style JSON: {\"method\", \"model\", \"num_speculative_tokens\"}");
}

}  // namespace specula::cli
