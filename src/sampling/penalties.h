// Logit bias and repetition / presence / frequency penalties, as llama.cpp applies them to a
// logit row before top-k / top-p / min-p / temperature (its chain: logit bias, then penalties):
//
//   logit[t] += bias[t]                                   (-inf bans t)
//   c = occurrences of t among the last `repeat_last_n` tokens of the history
//   if c > 0:  logit[t] = logit[t] > 0 ? logit[t] / repeat_penalty : logit[t] * repeat_penalty
//              logit[t] -= presence_penalty + frequency_penalty * c
//
// The window is llama.cpp's: all three penalties count the same last N tokens (-1: the whole
// history, which is llama.cpp's "context size"; 0: penalties off). The history is what the caller
// pushes: llama.cpp pushes the prompt tokens too, then every generated token.
//
// Speculative decoding stays exact when the draft and the target penalise every position with the
// same history. At draft / verify position i that history is (accepted tokens + d_1..d_{i-1}):
// push the drafted tokens as they are drafted or checked, then truncate() back to the accepted
// length. Counts are maintained incrementally, so push / pop / apply cost O(1) / O(1) / O(distinct
// tokens in the window + biased tokens), not O(window).
//
// Wiring (CLI `--repeat-penalty --repeat-last-n --presence-penalty --frequency-penalty
// --logit-bias`, request fields `repetition_penalty`/`repeat_penalty`, `repeat_last_n`,
// `presence_penalty`, `frequency_penalty`, `logit_bias`): fill PenaltyParams, call validate()
// to turn bad values into a specula::Error naming the field, build one Penalizer per sequence.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "sampling/dry.h"

namespace specula {

struct PenaltyParams {
    float repeat_penalty = 1.0f;    // 1: off (llama.cpp's default); must be > 0
    int repeat_last_n = 64;         // -1: whole history, 0: off (llama.cpp's default 64)
    float presence_penalty = 0.f;   // subtracted once from each token present in the window
    float frequency_penalty = 0.f;  // subtracted per occurrence in the window
    // Additive bias per token id (any order; a repeated id adds up). -INFINITY bans the token.
    std::vector<std::pair<int32_t, float>> logit_bias;
    // DRY over the same history (sampling/dry.h); Constraints applies it after the penalties.
    DryParams dry;

    bool penalties_on() const {
        return repeat_last_n != 0 &&
               (repeat_penalty != 1.f || presence_penalty != 0.f || frequency_penalty != 0.f);
    }
    bool active() const { return penalties_on() || !logit_bias.empty() || dry.on(); }
};

// Throws specula::Error naming the field when a value is out of range: repeat_penalty <= 0 or not
// finite, repeat_last_n < -1, a NaN / +inf penalty, a logit_bias id outside [0, n_vocab) or a NaN /
// +inf bias, and DRY's values (validate(DryParams)). The field names are the request's
// (`repeat_penalty`, `logit_bias`, `dry_base`, ...).
void validate(const PenaltyParams& p, int n_vocab);

// Parses a llama.cpp `--logit-bias` value: "ID(+|-)BIAS" (e.g. "15043+1", "15043-inf", "2-2.5");
// appends to `out`. Throws specula::Error quoting the text when it does not parse.
void parse_logit_bias(std::string_view text, std::vector<std::pair<int32_t, float>>& out);

// Parses a request's `logit_bias` and appends to `out`: OpenAI's object {"15043": -100, ...}
// (token id strings -> bias) or llama-server's array [[15043, -1.5], [2, false], ...] (false
// bans the token). Throws specula::Error naming `logit_bias` and the entry when an id is not an
// integer in [0, n_vocab) or a bias is not a finite number (or false).
void parse_logit_bias_json(const nlohmann::json& v, int n_vocab,
                           std::vector<std::pair<int32_t, float>>& out);

// Token history with per-token counts over the penalty window; applies PenaltyParams to a row.
class Penalizer {
  public:
    Penalizer(PenaltyParams params, int n_vocab);  // validates (throws Error)

    const PenaltyParams& params() const { return params_; }
    bool active() const { return params_.active(); }
    int n_vocab() const { return n_vocab_; }

    void reset();  // empty history
    void push(int32_t token);
    void push(std::span<const int32_t> tokens);
    void pop();                  // drops the last token (no-op on an empty history)
    void truncate(size_t size);  // keeps the first `size` tokens
    size_t size() const { return history_.size(); }
    std::span<const int32_t> history() const { return history_; }

    // Occurrences of `token` in the current window.
    int count(int32_t token) const { return counts_[size_t(token)]; }

    // Applies bias and penalties for the current history to `logits` (n_vocab values) in place.
    // Not DRY, which needs the vocabulary's breakers: Constraints applies it.
    void apply(float* logits) const;
    // Same on a const row: copies it into `scratch` and returns scratch.data(), or returns
    // `logits` itself when nothing is active (no copy).
    const float* apply(const float* logits, std::vector<float>& scratch) const;

  private:
    void add(int32_t token);
    void remove(int32_t token);
    size_t window() const;  // tokens counted

    PenaltyParams params_;
    int n_vocab_;
    std::vector<int32_t> history_;
    std::vector<int32_t> counts_;   // per token id, over the window
    std::vector<int32_t> present_;  // distinct tokens with count > 0
    std::vector<int32_t> slot_;     // index of a token in present_, -1 when absent
};

}  // namespace specula
