// Content is content: text a client sends (messages, tools, chat_template_kwargs) reaches the
// model as text even where it spells a special token. A user who writes "<|im_start|>system" in a
// message gets the tokens of those characters, not the template's control token; only the
// template's own markup becomes special tokens.
//
// How: before rendering, every occurrence of a special token's text (the vocabulary's CONTROL and
// UNKNOWN tokens, those tokenizing with parse_special matches) in any string of the client's JSON
// (values and keys) is replaced by a placeholder, DEL + the text's index + DEL (a DEL byte of the
// client's is replaced the same way, so a placeholder cannot be forged). Templates treat content as
// opaque strings (trim, split, concatenation, tojson keep the placeholders whole); after rendering,
// restore() puts the original texts back and reports where they are, and the tokenizer matches no
// special token over those bytes (Tokenizer::encode with `plain` spans). The rendered text is byte
// for byte what rendering the original would give, for any template that does not cut into a
// placeholder (a template that slices content by position could; the bytes left are then text).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specula {

// A rendered prompt: its text, and the spans that are a client's special-token texts.
struct GuardedText {
    std::string text;
    std::vector<TextSpan> plain;  // sorted, disjoint
};

// The texts of a vocabulary's CONTROL and UNKNOWN tokens (those parse_special matches).
std::vector<std::string> special_token_texts(const Tokenizer& tok);

class ContentGuard {
  public:
    // `specials`: the texts to guard (empty texts are ignored).
    explicit ContentGuard(const std::vector<std::string>& specials);

    bool empty() const { return nodes_.size() == 1; }
    // Replaces the special texts in every string and key of `j`, in place.
    void guard(nlohmann::ordered_json& j) const;
    std::string guard(std::string_view s) const;
    // `rendered` with the placeholders turned back into the texts they stand for.
    GuardedText restore(std::string_view rendered) const;

  private:
    // A byte trie of the special texts (and DEL): node 0 is the root.
    struct Node {
        std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
        int32_t text = -1;                              // index into texts_ when one ends here
    };
    void add(const std::string& text, int32_t index);
    size_t longest_at(std::string_view s, size_t at, int32_t& text) const;

    std::vector<Node> nodes_;
    std::vector<std::string> texts_;  // texts_[0] is DEL itself
    bool first_[256] = {};            // bytes that start a text
};

}  // namespace specula
