// Suffix decoding's parameters: see suffix_params.h.
#include "speculative/drafters/suffix_params.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "speculative/drafters/suffix_tree.h"

namespace specula {

namespace {

constexpr int kMaxDepth = 1024;

}  // namespace

size_t suffix_min_cache_bytes(int max_depth) {
    return size_t(kSuffixMinOutput) * SuffixTree::bytes_per_token(max_depth);
}

void check_suffix_params(const SuffixParams& p) {
    if (p.min_match < 1 || p.min_match > kMaxDepth)
        fail("--spec-suffix-min-match must be in [1, ", kMaxDepth, "], got ", p.min_match);
    if (p.max_depth < 2 || p.max_depth > kMaxDepth)
        fail("--spec-suffix-max-depth must be in [2, ", kMaxDepth, "], got ", p.max_depth);
    if (p.min_match >= p.max_depth)
        fail("--spec-suffix-min-match ", p.min_match, " must be below --spec-suffix-max-depth ",
             p.max_depth, " (a run that long leaves nothing to draft)");
    if (!(p.max_spec_factor > 0.f && p.max_spec_factor <= 64.f))
        fail("--spec-suffix-max-spec-factor must be in (0, 64], got ", p.max_spec_factor);
    if (!(p.min_token_prob >= 0.f && p.min_token_prob <= 1.f))
        fail("--spec-suffix-min-prob must be in [0, 1], got ", p.min_token_prob);
    if (p.max_cached_requests < 0)
        fail("--spec-suffix-max-requests must be >= 0, got ", p.max_cached_requests);
    const size_t floor = suffix_min_cache_bytes(p.max_depth);
    if (p.cache_bytes < floor)
        fail("--spec-suffix-cache-mb ", double(p.cache_bytes) / double(1 << 20),
             " is too small: the suffix tree needs at least ",
             std::ceil(double(floor) / double(1 << 20)), " MiB to hold one ", kSuffixMinOutput,
             "-token output at --spec-suffix-max-depth ", p.max_depth);
}

bool apply_suffix_json_key(const std::string& key, const nlohmann::json& v, SuffixParams& p) {
    const auto bad = [&](const char* what) {
        fail("--speculative-config: '", key, "' must be ", what, ", got ", v.dump());
    };
    if (key == "suffix_decoding_max_tree_depth") {
        if (!v.is_number_integer() || v.get<long>() < 2 || v.get<long>() > kMaxDepth)
            bad("an integer in [2, 1024]");
        p.max_depth = v.get<int>();
    } else if (key == "suffix_decoding_max_cached_requests") {
        if (!v.is_number_integer() || v.get<long>() < 0 || v.get<long>() > (1L << 30))
            bad("an integer >= 0");
        p.max_cached_requests = v.get<int>();
    } else if (key == "suffix_decoding_max_spec_factor") {
        if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 64) bad("in (0, 64]");
        p.max_spec_factor = v.get<float>();
    } else if (key == "suffix_decoding_min_token_prob") {
        if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1) bad("in [0, 1]");
        p.min_token_prob = v.get<float>();
    } else {
        return false;
    }
    return true;
}

}  // namespace specula
