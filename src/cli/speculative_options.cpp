// add_speculative_options: see speculative_options.h.
#include "cli/speculative_options.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <mutex>
#include <set>

namespace specula::cli {

namespace {

// The flag sets whose --draft was given on the command line (its default is "4").
std::set<const SpeculativeFlags*>& draft_given() {
    static std::set<const SpeculativeFlags*> s;
    return s;
}

}  // namespace

void add_speculative_options(CLI::App& cmd, SpeculativeFlags& f) {
    cmd.add_option("--model-draft,--md,--speculative-model", f.model_draft,
                   "-md: draft model for speculative decoding");
    cmd.add_option("--draft,--draft-max,--draft-n,--num-speculative-tokens", f.draft,
                   "tokens to draft per step: N, or auto (chosen per step)")
        ->capture_default_str()
        ->each([&f](const std::string&) { draft_given().insert(&f); });
    cmd.add_option("--draft-min", f.draft_min, "do not verify proposals shorter than this")
        ->capture_default_str();
    cmd.add_option("--draft-p-min", f.p_min,
                   "stop drafting when the draft's top probability falls below this")
        ->capture_default_str();
    cmd.add_option("--forced-drafts", f.forced_drafts,
                   "under a grammar (response_format, tool calls), draft the tokens it forces: at "
                   "most this many per step without a drafter, the draft length with one; 0: off")
        ->capture_default_str();
    cmd.add_option("--spec-type", f.spec_type,
                   "drafter: draft / draft_model (needs -md), ngram (prompt lookup) or mtp / "
                   "draft-mtp (the model's own nextn head, or an MTP sidecar's given with -md)");
    cmd.add_flag("--lookup", f.lookup, "n-gram prompt-lookup drafting (= --spec-type ngram)");
    cmd.add_option("--spec-ngram-min", f.ngram_min, "shortest n-gram to look up")
        ->capture_default_str();
    cmd.add_option("--spec-ngram-max", f.ngram_max, "longest n-gram to look up")
        ->capture_default_str();
    cmd.add_option("--speculative-config", f.speculative_config,
                   "vLLM style JSON: {\"method\", \"model\", \"num_speculative_tokens\", "
                   "\"prompt_lookup_max\", ...}");
}

SpeculativeConfig parse_speculative_cli(const SpeculativeFlags& f, const char* who) {
    SpeculativeConfig c = parse_speculative_flags(f);
    if (c.method == SpecMethod::none && draft_given().count(&f))
        std::fprintf(stderr,
                     "%s: warning: --draft %s does nothing without a drafter (give -md "
                     "DRAFT.gguf, or --spec-type ngram for prompt lookup)\n",
                     who, f.draft.c_str());
    return c;
}

}  // namespace specula::cli
