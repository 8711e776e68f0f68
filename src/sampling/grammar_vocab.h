// GrammarVocab: a vocabulary's token bytes prepared once for grammar masking, and the token-level
// operations on a GrammarState: which tokens may come next (mask a logit row), whether a drafted
// token is allowed, and advancing by a sampled token.
//
// A token is one of: text (its piece, token_to_piece(id, special = false), non-empty: the bytes it
// adds to the output), end-of-generation (Tokenizer::is_eog: allowed only when the state
// can_end()), or never allowed (other control / unused tokens, empty pieces).
//
// Masking walks the text tokens in byte order as a trie: a token reuses the states of the prefix
// it shares with the previous one, and once a prefix is refused every token starting with it is
// skipped (whole first- and second-byte subtrees in one jump); the row is then filled with -inf
// and the allowed logits put back. Inside a string (no escape or UTF-8 sequence pending), a token
// without a quote depends on the string alone, so that is decided once when the vocabulary is
// prepared; only the tokens with a quote are walked. Build one GrammarVocab per model and share
// it (immutable, thread-safe).
//
// Speculative decoding: mask the draft's row with the state after the drafted tokens so far, and
// the target's row at verify position i with the state after d_1..d_{i-1} (accept() a copy per
// position); both then sample from the masked (constrained) distribution, so rejection sampling
// stays exact. A drafted token the grammar refuses has target probability 0 and is rejected.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/grammar_state.h"

namespace specula {

class Tokenizer;

class GrammarVocab {
  public:
    enum Kind : uint8_t { kText, kEog, kNever };

    // pieces[id]: the token's output bytes; kinds[id]: its kind (a kText token with an empty
    // piece becomes kNever).
    GrammarVocab(std::vector<std::string> pieces, std::vector<Kind> kinds);
    static std::shared_ptr<const GrammarVocab> from_tokenizer(const Tokenizer& tok);

    int n_vocab() const { return int(kinds_.size()); }
    Kind kind(int32_t id) const { return kinds_[size_t(id)]; }
    std::string_view piece(int32_t id) const {
        return std::string_view(blob_).substr(off_[size_t(id)],
                                              off_[size_t(id) + 1] - off_[size_t(id)]);
    }

    // Whether `id` may come next in state `st`.
    bool allows(const GrammarState& st, int32_t id) const;
    // Advances `st` by token `id` and returns true, or returns false (st unchanged) when the token
    // is not allowed. An end-of-generation token leaves st as it is (returns st.can_end()).
    bool accept(GrammarState& st, int32_t id) const;

    // Sets logits[id] = -INFINITY for every token not allowed in `st` (n_vocab() values).
    void mask(const GrammarState& st, float* logits) const;
    // allowed[id] = 1 when the token is allowed, else 0 (resized to n_vocab()).
    void allowed(const GrammarState& st, std::vector<uint8_t>& allowed) const;

    // Forced tokens (speculative drafts that need no model): appends to `out` up to max_tokens
    // tokens the grammar forces from `st`, advancing `st` past them, and returns how many. The
    // bytes GrammarState::forced_bytes() names are cut into tokens greedily, longest piece first,
    // each piece lying inside the forced bytes (the text stops where no piece fits); where no
    // byte is forced but exactly one token is allowed (only_token(): e.g. the end-of-generation
    // token once the JSON is closed), that token, after which nothing more is proposed if it is
    // the end. `bytes` is scratch. Whether the model would tokenize the text the same way matters
    // only for how often the drafts are accepted, never for what is generated.
    int forced_tokens(GrammarState& st, int max_tokens, std::string& bytes,
                      std::vector<int32_t>& out) const;
    // The one token allowed in `st`, or -1 when none or several are.
    int32_t only_token(const GrammarState& st) const;
    // The text token with the longest piece that is a prefix of `bytes` (of equal pieces the
    // highest id: a byte-fallback token comes before its ordinary twin), or -1.
    int32_t longest_piece_prefix(std::string_view bytes) const;

  private:
    // Token ids ordered by piece bytes, with what the trie walk needs to skip subtrees.
    struct Trie {
        std::vector<int32_t> ids;
        std::vector<uint16_t> lcp;           // common prefix of ids[k - 1] and ids[k]
        std::vector<uint32_t> next0, next1;  // next k' > k whose lcp is <= 0, <= 1
        void build(const std::vector<std::string>& pieces, std::vector<int32_t> ids);
    };
    // Walks `trie` from `st`: allow(id) for each token the state accepts, ban(id) for the others.
    template <class Allow, class Ban>
    void walk(const Trie& trie, const GrammarState& st, Allow&& allow, Ban&& ban) const;
    // Bans the string-content tokens that start more than `budget` code points.
    template <class Ban>
    void ban_longer(size_t budget, Ban&& ban) const;

    std::vector<Kind> kinds_;
    std::string blob_;                 // all pieces back to back
    std::vector<uint32_t> off_;        // piece i is blob_[off_[i], off_[i+1])
    std::vector<int32_t> not_string_;  // quote-free tokens that are not string content
    // Quote-free string-content tokens by the code points they start, most first (maxLength).
    std::vector<std::pair<uint32_t, int32_t>> by_cps_;
    Trie text_;                         // every text token
    Trie quoted_;                       // text tokens with a '"' byte
    size_t max_len_ = 0;                // longest piece
    std::vector<int32_t> eog_, never_;  // ids by kind
    std::vector<int32_t> one_byte_;     // [b]: a text token whose piece is byte b, or -1
};

}  // namespace specula
