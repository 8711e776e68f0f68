// SpeculativeConfig: how to decode speculatively, the one description that `run`, `bench` and
// `serve` share, and the one place where its command-line spellings are parsed.
//
// Flags (llama.cpp's spellings first, then aliases; every subcommand takes the same ones):
//   -md, --model-draft, --md, --speculative-model FILE   draft model (method draft_model), or
//                               with method mtp an MTP sidecar (model.h's
//                               LoadOptions::mtp_sidecar), with method eagle3 the EAGLE-3 head
//                               (drafters/eagle3_head.h), with method dflash the DFlash drafter
//                               (drafters/dflash_head.h)
//   --draft, --draft-max, --draft-n, --num-speculative-tokens N|auto (default auto)
//   --draft-min N        a proposal shorter than N is not verified
//   --draft-p-min P      stop drafting when the draft's top probability drops below P
//   --spec-type draft|draft_model|ngram|mtp|draft-mtp|eagle3|draft-eagle3, --lookup (= ngram)
//   --spec-ngram-min N, --spec-ngram-max N
//   --spec-type dflash -md DRAFT: a DFlash block drafter (drafters/dflash.h)
//   --spec-type gemma4-assistant -md ASSISTANT: Gemma 4's assistant (drafters/gemma4_assistant.h);
//                        --spec-type mtp with a gemma4_mtp / gemma4-assistant file drafts with it
//   --spec-type suffix [-md DRAFT]: suffix decoding (drafters/suffix_drafter.h), --spec-suffix-*
//   --draft-trace FILE   run: one JSON line per step, what was drafted and kept (draft_trace.h)
//   --speculative-config JSON   vLLM's {"method", "model", "num_speculative_tokens",
//                               "prompt_lookup_min", "prompt_lookup_max", ...}; its keys
//                               override the flags above (one prompt_lookup bound given sets
//                               the other to it, as vLLM does; neither: --spec-ngram-min/max)
// Without --spec-type the method is draft_model when a draft model is given, else none.
#pragma once

#include <string>

#include "model/load/offload.h"
#include "speculative/drafters/ngram_drafter.h"
#include "speculative/drafters/suffix_params.h"

namespace specula {

enum class SpecMethod {
    none,
    draft_model,
    ngram,
    mtp,
    eagle3,
    suffix,
    medusa,
    dflash,
    gemma4_assistant
};

struct SpeculativeConfig {
    SpecMethod method = SpecMethod::none;
    std::string draft_model;  // the draft model (draft_model), MTP sidecar (mtp) or head (eagle3)
    int n_draft = 4;          // fixed draft length per step; 0: plain decoding
    bool draft_auto =
        false;           // choose the length every step (speculative/draft_length/draft_length.h)
    int draft_min = 0;   // a proposal shorter than this is not verified
    float p_min = 0.0f;  // draft-model drafting stops below this top probability
    int n_forced = 8;    // grammar-forced drafts per step without a drafter (GenParams)
    NgramParams ngram;   // method ngram
    // Where the draft model runs its layers (-ngld; default: the environment's).
    OffloadParams draft_gpu = env_placement().draft;
    std::string draft_repack_cache;  // --repack-cache DIR for the draft model too (pack_cache.h)
    std::string draft_trace;         // --draft-trace FILE (run only); "": none
    SuffixParams suffix;             // method suffix (drafters/suffix_params.h lists its flags)
};

// The speculative options as a command line gives them, before they are checked.
struct SpeculativeFlags {
    std::string model_draft;
    // N or "auto" (the default, as llama.cpp's adapts its drafts by the draft's confidence:
    // the length is chosen every step from the measured acceptance and pass costs, 0 where
    // drafting loses; docs/speculative.md)
    std::string draft = "auto";
    std::string spec_type;  // "", "draft", "draft_model", "ngram", "mtp" or "draft-mtp"
    bool lookup = false;
    int draft_min = 0;
    float p_min = 0.0f;
    int forced_drafts = 8;  // --forced-drafts
    int ngram_min = 2, ngram_max = 4;
    std::string speculative_config;  // vLLM's JSON; "" when not given
    std::string draft_trace;         // --draft-trace FILE
    SuffixParams suffix;             // --spec-suffix-* (cache_bytes from suffix_cache_mb)
    double suffix_cache_mb = 64;     // --spec-suffix-cache-mb
};

// The MTP sidecar the target is to be loaded with (LoadOptions::mtp_sidecar): -md with method
// mtp, else "" (also when -md is Gemma 4's assistant: load_speculative drafts with it).
std::string mtp_sidecar(const SpeculativeConfig& c);

// The most rows one verify pass of a sequence takes (its last token, the longest draft: --draft
// or the adaptive length's bound, and the tokens a grammar may force): the logits rows its
// target session keeps at most (model/memory_plan.h's CachePlan::logit_rows).
int max_verify_rows(const SpeculativeConfig& config);

// "none", "draft_model", "ngram", "mtp", "eagle3", "suffix", "medusa", "dflash" or
// "gemma4-assistant".
const char* method_name(SpecMethod method);

// Checks the flags and turns them into a config; Error naming the flag otherwise.
SpeculativeConfig parse_speculative_flags(const SpeculativeFlags& flags);

// Parses a draft length: "auto" or 0..64 into config (Error naming --draft otherwise).
void parse_draft_length(const std::string& value, SpeculativeConfig& config);

// The draft length as --draft spells it: "auto" or N.
std::string draft_length_name(const SpeculativeConfig& config);

}  // namespace specula
