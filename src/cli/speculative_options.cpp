// add_speculative_options: see speculative_options.h.
#include "cli/speculative_options.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "common/error.h"

namespace specula::cli {

namespace {

// The flag sets whose --draft was given on the command line (its default is "auto").
std::set<const SpeculativeFlags*>& draft_given() {
    static std::set<const SpeculativeFlags*> s;
    return s;
}

// Suffix decoding's (speculative/drafters/suffix_params.h).
void add_suffix_options(CLI::App& cmd, SpeculativeFlags& f) {
    SuffixParams& s = f.suffix;
    cmd.add_option("--spec-suffix-min-match", s.min_match,
                   "suffix: shortest matched run that drafts (with -md: else the model drafts)")
        ->capture_default_str();
    cmd.add_option("--spec-suffix-max-depth", s.max_depth,
                   "suffix: longest run the trees count (matched + drafted)")
        ->capture_default_str();
    cmd.add_option("--spec-suffix-max-spec-factor", s.max_spec_factor,
                   "suffix: at most this many drafted tokens per matched token")
        ->capture_default_str();
    cmd.add_option("--spec-suffix-min-prob", s.min_token_prob,
                   "suffix: stop drafting below this estimated token probability")
        ->capture_default_str();
    cmd.add_option("--spec-suffix-max-requests", s.max_cached_requests,
                   "suffix: recent outputs the shared tree keeps")
        ->capture_default_str();
    cmd.add_option("--spec-suffix-cache-mb", f.suffix_cache_mb,
                   "suffix: memory bound of the tree over recent outputs, MiB")
        ->capture_default_str();
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
    cmd.add_option(
        "--spec-type", f.spec_type,
        "drafter: draft / draft_model (needs -md), ngram (prompt lookup), suffix (suffix "
        "decoding, with -md: combined with the draft model), medusa (-md HEADS.gguf), mtp / "
        "draft-mtp (the model's own nextn head, or an MTP sidecar's given with -md), eagle3 / "
        "draft-eagle3 (-md HEAD.gguf: an EAGLE-3 head), dflash (-md DRAFT.gguf: a DFlash block "
        "drafter), gemma4-assistant (-md ASSISTANT.gguf: Gemma 4's assistant; mtp with such a "
        "file too)");
    cmd.add_flag("--lookup", f.lookup, "n-gram prompt-lookup drafting (= --spec-type ngram)");
    cmd.add_option("--spec-ngram-min", f.ngram_min, "shortest n-gram to look up")
        ->capture_default_str();
    cmd.add_option("--spec-ngram-max", f.ngram_max, "longest n-gram to look up")
        ->capture_default_str();
    cmd.add_option("--speculative-config", f.speculative_config,
                   "vLLM style JSON: {\"method\", \"model\", \"num_speculative_tokens\", "
                   "\"prompt_lookup_max\", ...}");
    add_suffix_options(cmd, f);
    cmd.add_option("--draft-trace", f.draft_trace,
                   "run: write one JSON line per step to this file (the drafted ids and how many "
                   "the target accepted)");
}

SpeculativeConfig parse_speculative_cli(const SpeculativeFlags& f, const char* who) {
    SpeculativeConfig c = parse_speculative_flags(f);
    if (!c.draft_trace.empty() && std::string(who) != "run")
        fail("--draft-trace is for `specula run`", std::string(who) == "serve"
                                                       ? "; a server request asks for its "
                                                         "trace with \"speculative\": "
                                                         "{\"trace\": true}"
                                                       : "");
    if (c.method == SpecMethod::none && draft_given().count(&f))
        std::fprintf(stderr,
                     "%s: warning: --draft %s does nothing without a drafter (give -md "
                     "DRAFT.gguf, or --spec-type ngram for prompt lookup)\n",
                     who, f.draft.c_str());
    return c;
}

}  // namespace specula::cli
