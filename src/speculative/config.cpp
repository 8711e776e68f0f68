// SpeculativeConfig parsing: see config.h.
#include "speculative/config.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "speculative/draft_length/draft_length.h"
#include "speculative/drafters/gemma4_assistant_head.h"

namespace specula {

namespace {

constexpr int kMaxDraftLength = 64;  // --draft, --draft-min, num_speculative_tokens
constexpr int kMaxNgram = 64;        // --spec-ngram-max

SpecMethod parse_method(const std::string& name, const char* where) {
    if (name == "draft" || name == "draft_model") return SpecMethod::draft_model;
    if (name == "ngram") return SpecMethod::ngram;
    if (name == "mtp" || name == "draft-mtp") return SpecMethod::mtp;
    if (name == "eagle3" || name == "draft-eagle3") return SpecMethod::eagle3;
    if (name == "suffix") return SpecMethod::suffix;
    if (name == "medusa") return SpecMethod::medusa;
    if (name == "dflash") return SpecMethod::dflash;
    if (name == "gemma4-assistant" || name == "gemma4_assistant")
        return SpecMethod::gemma4_assistant;
    fail(where,
         ": the speculative method must be draft, draft_model, ngram, mtp, eagle3, suffix, medusa, "
         "dflash or gemma4-assistant, got '",
         name, "'");
}

// An optional integer key of vLLM's JSON in [lo, hi].
int json_int(const nlohmann::json& value, const std::string& key, int lo, int hi) {
    if (!value.is_number_integer() || value.get<int64_t>() < lo || value.get<int64_t>() > hi)
        fail("--speculative-config: '", key, "' must be an integer in [", lo, ", ", hi, "]");
    return value.get<int>();
}

// vLLM's --speculative-config: its keys override the flags. Every key vLLM documents for the
// methods Specula has is taken: what it means here, accepted at the value that changes nothing
// (GGUF files carry their quantization and revision; there are no CUDA graphs to disable), or
// refused with the reason.
void apply_vllm_json(const std::string& text, SpeculativeFlags& f, bool& method_given) {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) fail("--speculative-config must be a JSON object, got: ", text);
    int lookup_min = -1, lookup_max = -1;
    bool suffix_keys = false;
    for (const auto& [key, value] : j.items()) {
        if (key == "method") {
            if (!value.is_string()) fail("--speculative-config: 'method' must be a string");
            f.spec_type = value.get<std::string>();
            f.lookup = false;
            method_given = true;
        } else if (key == "model") {
            if (!value.is_string()) fail("--speculative-config: 'model' must be a string");
            f.model_draft = value.get<std::string>();
        } else if (key == "num_speculative_tokens") {
            f.draft = std::to_string(json_int(value, key, 0, kMaxDraftLength));
        } else if (key == "prompt_lookup_min") {
            lookup_min = json_int(value, key, 1, kMaxNgram);
        } else if (key == "prompt_lookup_max") {
            lookup_max = json_int(value, key, 1, kMaxNgram);
        } else if (key == "draft_tensor_parallel_size" || key == "tensor_parallel_size") {
            if (json_int(value, key, 1, 1 << 20) != 1)
                fail("--speculative-config: '", key,
                     "' must be 1: Specula runs the draft in one process");
        } else if (key == "enforce_eager" || key == "disable_padded_drafter_batch") {
            if (!value.is_boolean()) fail("--speculative-config: '", key, "' must be a boolean");
        } else if (key == "quantization" || key == "revision" || key == "code_revision" ||
                   key == "max_model_len" || key == "disable_by_batch_size") {
            if (value.is_null()) continue;
            if (key == "disable_by_batch_size")
                fail(
                    "--speculative-config: 'disable_by_batch_size' is not supported: with --draft "
                    "auto the draft length follows the load and drops to plain decoding when "
                    "drafting loses");
            if (key == "max_model_len")
                fail(
                    "--speculative-config: 'max_model_len' is not supported: the draft model's "
                    "context follows the target's (-c)");
            fail("--speculative-config: '", key,
                 "' is not supported: a GGUF draft model carries "
                 "its own quantization and version; give the file as 'model'");
        } else if (apply_suffix_json_key(key, value, f.suffix)) {
            suffix_keys = true;
        } else {
            fail("--speculative-config: unsupported key '", key,
                 "' (supported: method, model, num_speculative_tokens, prompt_lookup_min, "
                 "prompt_lookup_max; neutral: draft_tensor_parallel_size 1, enforce_eager, "
                 "disable_padded_drafter_batch)");
        }
    }
    if (suffix_keys && f.spec_type != "suffix")
        fail("--speculative-config: the suffix_decoding_* keys apply to method \"suffix\" only");
    // vLLM: one bound given sets the other to it.
    if (lookup_min > 0 || lookup_max > 0) {
        if (lookup_min < 0) lookup_min = lookup_max;
        if (lookup_max < 0) lookup_max = lookup_min;
        if (f.spec_type != "ngram")
            fail("--speculative-config: prompt_lookup_min/max apply to method \"ngram\" only");
        if (lookup_min > lookup_max)
            fail("--speculative-config: prompt_lookup_min ", lookup_min,
                 " is larger than prompt_lookup_max ", lookup_max);
        f.ngram_min = lookup_min;
        f.ngram_max = lookup_max;
    }
}

}  // namespace

std::string mtp_sidecar(const SpeculativeConfig& c) {
    if (c.method != SpecMethod::mtp || c.draft_model.empty()) return {};
    return Gemma4Assistant::is_assistant_file(c.draft_model) ? std::string() : c.draft_model;
}

int max_verify_rows(const SpeculativeConfig& c) {
    int draft = 0;
    if (c.method != SpecMethod::none) draft = c.draft_auto ? DraftLengthParams{}.n_max : c.n_draft;
    return 1 + std::max(draft, c.n_forced);
}

const char* method_name(SpecMethod method) {
    switch (method) {
        case SpecMethod::draft_model:
            return "draft_model";
        case SpecMethod::ngram:
            return "ngram";
        case SpecMethod::mtp:
            return "mtp";
        case SpecMethod::eagle3:
            return "eagle3";
        case SpecMethod::suffix:
            return "suffix";
        case SpecMethod::medusa:
            return "medusa";
        case SpecMethod::dflash:
            return "dflash";
        case SpecMethod::gemma4_assistant:
            return "gemma4-assistant";
        case SpecMethod::none:
            break;
    }
    return "none";
}

void parse_draft_length(const std::string& value, SpeculativeConfig& config) {
    if (value == "auto") {
        config.draft_auto = true;
        return;
    }
    int n = -1;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 0 || n > kMaxDraftLength)
        fail("--draft: expected 'auto' or a length 0..64, got '", value, "'");
    config.draft_auto = false;
    config.n_draft = n;
}

std::string draft_length_name(const SpeculativeConfig& config) {
    return config.draft_auto ? "auto" : std::to_string(config.n_draft);
}

SpeculativeConfig parse_speculative_flags(const SpeculativeFlags& flags) {
    SpeculativeFlags f = flags;
    bool from_json = false;
    if (!f.speculative_config.empty()) apply_vllm_json(f.speculative_config, f, from_json);
    const char* where = from_json ? "--speculative-config" : "--spec-type";
    if (f.lookup && !f.spec_type.empty() && f.spec_type != "ngram")
        fail("--lookup is --spec-type ngram; it cannot be combined with --spec-type ", f.spec_type);

    SpeculativeConfig c;
    c.draft_model = f.model_draft;
    if (f.lookup)
        c.method = SpecMethod::ngram;
    else if (!f.spec_type.empty())
        c.method = parse_method(f.spec_type, where);
    else if (!f.model_draft.empty())
        c.method = SpecMethod::draft_model;
    if (c.method == SpecMethod::draft_model && c.draft_model.empty())
        fail("the speculative method draft_model needs a draft model (-md FILE)");
    if (c.method == SpecMethod::eagle3 && c.draft_model.empty())
        fail("the speculative method eagle3 needs the EAGLE-3 head (-md HEAD.gguf)");
    if (c.method == SpecMethod::medusa && c.draft_model.empty())
        fail(where,
             ": the speculative method medusa needs the Medusa heads (-md HEADS.gguf, or "
             "vLLM's \"model\")");
    if (c.method == SpecMethod::dflash && c.draft_model.empty())
        fail(where,
             ": the speculative method dflash needs the DFlash drafter (-md DRAFT.gguf, or vLLM's "
             "\"model\")");
    if (c.method == SpecMethod::gemma4_assistant && c.draft_model.empty())
        fail(where,
             ": the speculative method gemma4-assistant needs Gemma 4's assistant (-md "
             "ASSISTANT.gguf, or vLLM's \"model\")");
    if (c.method == SpecMethod::ngram && !c.draft_model.empty())
        fail(
            "n-gram drafting (--spec-type ngram) takes no draft model: drop -md, or use "
            "--spec-type draft");

    parse_draft_length(f.draft, c);
    if (f.draft_min < 0 || f.draft_min > kMaxDraftLength)
        fail("--draft-min must be in [0, ", kMaxDraftLength, "], got ", f.draft_min);
    if (!c.draft_auto && c.n_draft > 0 && f.draft_min > c.n_draft && c.method != SpecMethod::none)
        fail("--draft-min ", f.draft_min, " is larger than --draft ", c.n_draft,
             ": no proposal would ever be used");
    c.draft_min = f.draft_min;
    if (!(f.p_min >= 0.f && f.p_min <= 1.f))  // also refuses NaN
        fail("--draft-p-min must be in [0, 1], got ", f.p_min);
    c.p_min = f.p_min;
    if (f.forced_drafts < 0 || f.forced_drafts > kMaxDraftLength)
        fail("--forced-drafts must be in [0, ", kMaxDraftLength, "], got ", f.forced_drafts);
    c.n_forced = f.forced_drafts;
    if (f.ngram_min < 1 || f.ngram_max < f.ngram_min || f.ngram_max > kMaxNgram)
        fail("--spec-ngram-min/max must satisfy 1 <= min <= max <= ", kMaxNgram, ", got ",
             f.ngram_min, "/", f.ngram_max);
    c.ngram = NgramParams{f.ngram_min, f.ngram_max};
    c.draft_trace = f.draft_trace;
    c.suffix = f.suffix;
    if (!(f.suffix_cache_mb > 0 && f.suffix_cache_mb <= 1 << 20))
        fail("--spec-suffix-cache-mb must be in (0, 1048576], got ", f.suffix_cache_mb);
    c.suffix.cache_bytes = size_t(f.suffix_cache_mb * double(1 << 20));
    if (c.method == SpecMethod::suffix) check_suffix_params(c.suffix);
    return c;
}

}  // namespace specula
