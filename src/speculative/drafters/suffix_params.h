// Suffix decoding's parameters (speculative/drafters/suffix_drafter.h), with ik_llama.cpp's and
// vLLM's names, and their checks:
//   --spec-suffix-min-match N      ik_llama.cpp's suffix_min_match_len: the draft's run must match
//                                  at least N history tokens; with a draft model (-md), a suffix
//                                  draft is used when it matched this many, else the model drafts
//   --spec-suffix-max-depth N      ik_llama.cpp's suffix_max_depth, vLLM's
//                                  suffix_decoding_max_tree_depth: the longest run the trees count
//                                  (matched prefix + drafted tokens)
//   --spec-suffix-max-spec-factor F   vLLM's suffix_decoding_max_spec_factor: at most F tokens
//                                  drafted per matched token
//   --spec-suffix-min-prob P       vLLM's suffix_decoding_min_token_prob: stop drafting when a
//                                  token's estimated probability falls below P
//   --spec-suffix-max-requests N   vLLM's suffix_decoding_max_cached_requests: outputs the
//                                  server-wide tree keeps (the oldest go first)
//   --spec-suffix-cache-mb M       the server-wide tree's memory bound, MiB; it must hold one
//                                  output of kSuffixMinOutput tokens at the depth
// vLLM's keys go in --speculative-config with "method": "suffix" (apply_suffix_json_key).
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace specula {

struct SuffixParams {
    int min_match = 3;
    int max_depth = 24;
    float max_spec_factor = 1.0f;
    float min_token_prob = 0.1f;
    int max_cached_requests = 10000;
    size_t cache_bytes = size_t(64) << 20;
};

// The smallest output the server-wide tree must be able to hold.
constexpr int kSuffixMinOutput = 1024;

// The memory bound's floor at `max_depth`, in bytes.
size_t suffix_min_cache_bytes(int max_depth);

// Checks every parameter; Error naming the flag (the memory bound: its floor too).
void check_suffix_params(const SuffixParams& p);

// One key of vLLM's --speculative-config for method suffix: true when it was one of
// suffix_decoding_max_tree_depth, _max_cached_requests, _max_spec_factor, _min_token_prob (set
// into `p`, Error naming the key when out of range), false for any other key.
bool apply_suffix_json_key(const std::string& key, const nlohmann::json& value, SuffixParams& p);

}  // namespace specula
