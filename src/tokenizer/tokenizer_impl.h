// Internal: the machinery shared by the SPM ("llama") and BPE ("gpt2") tokenizers, following
// llama.cpp's llama_vocab: loading the tokenizer.* keys (vocab_load.cpp), splitting special tokens
// out of the text, pieces and detokenization (tokenizer.cpp). spm.cpp and bpe.cpp supply the
// per-model defaults, the word-level algorithm and the token pieces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/string_index.h"
#include "tokenizer/tokenizer.h"

namespace specula {

class VocabTokenizer : public Tokenizer {
  public:
    std::vector<token_id> encode(std::string_view text, bool add_special,
                                 bool parse_special) const override;
    std::vector<token_id> encode(std::string_view text, bool add_special,
                                 std::span<const TextSpan> plain) const override;
    std::string token_to_piece(token_id id, bool special = true) const override;
    std::string decode(const std::vector<token_id>& tokens, bool remove_special = false,
                       bool unparse_special = true) const override;

    // Reads the vocabulary from the GGUF's tokenizer.* keys (throws Error naming the key).
    void load(const GGUFFile& f);

    token_id find_token(std::string_view text) const override;

  protected:
    // Per-model step of load(), run after the token list is read: default special ids and flags,
    // and whatever else the model needs (merges, pre-tokenizer).
    virtual void configure(const GGUFFile& f) = 0;
    // Appends the tokens of one fragment of plain text. `after_special` is true for the first
    // fragment and for one that follows a special token.
    virtual void encode_fragment(std::string_view text, bool after_special,
                                 std::vector<token_id>& out) const = 0;
    // The bytes a token stands for, as llama.cpp's token-to-piece cache holds them.
    virtual std::string make_piece(token_id id) const = 0;
    // llama.cpp's linefeed id.
    virtual token_id find_newline() const = 0;

    bool is_special_attr(token_id id) const;  // CONTROL or UNKNOWN
    bool add_space_prefix_ = false;
    bool clean_spaces_ = false;
    bool force_add_bos_ = false;  // add_bos whatever tokenizer.ggml.add_bos_token says (gemma4)
    token_id eom_ = -1;

  private:
    struct Fragment {
        token_id token;  // >= 0: a special token; -1: text[off, off + len)
        size_t off, len;
    };
    std::vector<Fragment> partition(std::string_view text, bool parse_special,
                                    std::span<const TextSpan> plain) const;

    std::vector<token_id> encode_parts(std::string_view text, bool add_special,
                                       const std::vector<Fragment>& parts) const;
    void read_tokens(const GGUFFile& f);
    void read_special_ids(const GGUFFile& f);
    void detect_special_tokens();
    void build_caches(const GGUFFile& f);

    StringIndex token_index_;  // text -> id (the last id when texts repeat, as llama.cpp)
    std::vector<token_id> special_tokens_;  // CONTROL, USER_DEFINED, UNKNOWN; longest text first
    std::vector<uint8_t> strip_;            // kLstrip / kRstrip per token
    std::vector<std::string> pieces_;       // make_piece of every token
};

inline constexpr uint8_t kLstrip = 1, kRstrip = 2;

std::unique_ptr<VocabTokenizer> make_spm_tokenizer();
std::unique_ptr<VocabTokenizer> make_bpe_tokenizer();

// llama.cpp's clean_up_tokenization: drops the space before ? ! . , before a lone quote and
// before the contractions 's 'm 're 've.
std::string clean_spaces(std::string s);

}  // namespace specula
