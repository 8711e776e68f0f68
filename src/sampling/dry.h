// DRY ("Don't Repeat Yourself", pi6am's sampler from koboldcpp, llama.cpp's `dry`): penalises
// the tokens that would extend a verbatim repetition of an earlier stretch of the history.
//
// Over the last `penalty_last_n` tokens of the history (-1: all of it, llama.cpp's "context
// size"), for every earlier position j whose tokens h[j-L+1..j] equal the history's last L tokens
// (the longest such L, at most `rep_limit`), the token h[j+1] that followed them would make the
// repetition L+1 long. Each such token t, with the longest L found for it, gets
//
//   logit[t] -= multiplier * base ^ (L - allowed_length)      when L >= allowed_length
//
// (the exponent clamped where base ^ exponent would overflow a float). Sequence breakers (strings,
// by default "\n", ":", "\"", "*") cut repetitions: a match never reaches back across the last
// occurrence of a breaker in the history, and a token that is a whole breaker by itself is never
// penalised. A breaker is matched on tokens: each token whose text contains it, and each token
// whose text ends with a beginning of it followed by the tokens of the rest (at most 20 of them),
// as llama.cpp prepares them (DryBreakers).
//
// DRY is a function of the history alone, so under speculative decoding the drafter and the
// verifier apply it at each position with the history up to that position (Constraints does, with
// the penalties' history: the prompt counts, as in llama.cpp) and the output keeps the target's
// distribution.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace specula {

class Tokenizer;

struct DryParams {
    float multiplier = 0.f;   // 0: off (llama.cpp's default); must be >= 0
    float base = 1.75f;       // must be >= 1 (with DRY on)
    int allowed_length = 2;   // repetitions up to this long go unpenalised; >= 0
    int penalty_last_n = -1;  // tokens looked back over; -1: the whole history, 0: off
    std::vector<std::string> sequence_breakers{"\n", ":", "\"", "*"};

    bool on() const { return multiplier != 0.f && penalty_last_n != 0; }
};

// Throws specula::Error naming the request field (dry_multiplier, dry_base, ...) when a value is
// out of range: a negative or non-finite multiplier, a base that is not finite (or < 1 with DRY
// on: llama.cpp takes a smaller one as "off"), allowed_length < 0, penalty_last_n < -1, an empty
// breaker.
void validate(const DryParams& p);

// The breakers as token sequences: per head token, the tails that complete a breaker after it
// (empty: the head token's text holds a whole breaker). Immutable; build one per breaker list and
// model and share it.
class DryBreakers {
  public:
    // piece(id): the token's text as llama.cpp's detokenize of that one token (special tokens'
    // text included); tokenize(text): its tokens, without special tokens or BOS. Breakers longer
    // than 40 bytes are cut to 40 (llama.cpp's limit).
    DryBreakers(std::span<const std::string> breakers, int n_vocab,
                const std::function<std::string(int32_t)>& piece,
                const std::function<std::vector<int32_t>(std::string_view)>& tokenize);
    static std::shared_ptr<const DryBreakers> from_tokenizer(std::span<const std::string> breakers,
                                                             const Tokenizer& tok);

    // The tails of breakers whose head is `token` (none: empty span).
    std::span<const std::vector<int32_t>> tails(int32_t token) const;
    // Whether `token` alone holds a whole breaker (DRY never penalises it).
    bool whole(int32_t token) const;

  private:
    std::unordered_map<int32_t, std::vector<std::vector<int32_t>>> tails_;
};

// Subtracts DRY's penalties for `history` (oldest first: the prompt, then the output so far) from
// `logits` (one value per token id). Off (p.on() false) or a history too short: nothing changes.
void apply_dry(const DryParams& p, const DryBreakers& breakers, std::span<const int32_t> history,
               float* logits);

}  // namespace specula
