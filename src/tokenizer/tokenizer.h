// Tokenizer built from a GGUF's tokenizer.* metadata, identical to llama.cpp's (c392e509):
//  - "llama": SentencePiece BPE by scores, with byte fallback (<0xNN>) and the "▁" space marker;
//  - "gpt2": byte-level BPE by merge rank, after a pre-tokenizer chosen by tokenizer.ggml.pre
//    (llama-bpe/llama3, qwen2, gpt-2, deepseek-llm, deepseek-coder, deepseek-v3, glm4, falcon,
//    mpt, starcoder, refact, gpt-4o (o200k: gpt-oss), default and a few aliases), whose regexes
//    run through PCRE2 with UTF and UCP (gpt-4o on llama.cpp's category-collapsed text,
//    pretokenizer.h);
//  - "gemma4" (ik_llama.cpp 8337e4c): that BPE over raw UTF-8 with "▁" for spaces, split only
//    at newlines, with <0xNN> byte fallback; BOS always added.
// Special-token detection by text (end-of-generation, gpt-oss's framing tokens) follows
// ik_llama.cpp 8337e4c.
// Special (CONTROL, UNKNOWN) tokens are matched in the text only with parse_special;
// USER_DEFINED tokens always are. Malformed UTF-8 never fails: SPM falls back to byte tokens,
// BPE reads each bad byte as U+FFFD, as llama.cpp does. A Tokenizer is immutable after loading
// and safe to use from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specula {

class GGUFFile;

using token_id = int32_t;

// Bytes [begin, end) of a text.
struct TextSpan {
    size_t begin = 0, end = 0;
};

// tokenizer.ggml.token_type values.
enum class TokenAttr : int32_t {
    UNDEFINED = 0,
    NORMAL = 1,
    UNKNOWN = 2,
    CONTROL = 3,
    USER_DEFINED = 4,
    UNUSED = 5,
    BYTE = 6,
};

class Tokenizer {
  public:
    // Throws Error naming the key when the metadata is missing or malformed, or when the model
    // or pre-tokenizer is not supported (the message lists what is).
    static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& f);
    virtual ~Tokenizer() = default;

    // llama_tokenize(text, add_special, parse_special).
    virtual std::vector<token_id> encode(std::string_view text, bool add_special,
                                         bool parse_special) const = 0;
    // encode(text, add_special, parse_special = true), except that a CONTROL or UNKNOWN token
    // is not matched where its text overlaps one of `plain` (sorted, disjoint): there the bytes
    // are text, as with parse_special = false (a client's message inside a rendered chat
    // template: chat/content_guard.h).
    virtual std::vector<token_id> encode(std::string_view text, bool add_special,
                                         std::span<const TextSpan> plain) const = 0;

    // Bytes of one token as llama_token_to_piece(id, lstrip=0, special): byte tokens give their
    // byte, "▁" becomes a space (SPM), byte-level BPE maps back to raw bytes; CONTROL tokens give
    // their text only when `special`; UNUSED tokens give "".
    virtual std::string token_to_piece(token_id id, bool special = true) const = 0;

    // llama_detokenize(tokens, remove_special, unparse_special): concatenated pieces. With
    // add_space_prefix (SPM) the first token's piece loses one leading space, unless
    // remove_special dropped a leading BOS (then nothing is stripped, as in llama.cpp). Where the
    // vocabulary sets clean_spaces (gpt-2, llama-bpe, falcon, ...), " ?", " !", " .", " ,",
    // " ' " and " 's", " 'm", " 're", " 've" lose their space. Throws Error for an id outside
    // the vocabulary (as does token_to_piece).
    virtual std::string decode(const std::vector<token_id>& tokens, bool remove_special = false,
                               bool unparse_special = true) const = 0;

    // The id whose text is exactly `text` (the last one when texts repeat), or -1.
    virtual token_id find_token(std::string_view text) const = 0;

    const std::string& model() const { return model_; }  // "llama", "gpt2" or "gemma4"
    const std::string& pre() const { return pre_; }      // pre-tokenizer name ("" for SPM)
    int32_t n_vocab() const { return static_cast<int32_t>(texts_.size()); }
    const std::string& token_text(token_id id) const { return texts_.at(id); }
    TokenAttr token_attr(token_id id) const { return attrs_.at(id); }
    float token_score(token_id id) const { return scores_.empty() ? 0.f : scores_.at(id); }

    token_id bos() const { return bos_; }  // -1 when none
    token_id eos() const { return eos_; }
    token_id eot() const { return eot_; }
    token_id unk() const { return unk_; }
    token_id pad() const { return pad_; }
    token_id nl() const { return nl_; }  // the token "\n" starts with (llama.cpp's linefeed id)
    // Fill-in-the-middle tokens (from keys, else found by text as llama.cpp does); -1 when none.
    struct FimIds {
        token_id pre = -1, suf = -1, mid = -1, pad = -1, rep = -1, sep = -1;
    };
    const FimIds& fim() const { return fim_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    // End-of-generation: eos, eot and the other end tokens llama.cpp auto-detects.
    bool is_eog(token_id id) const;
    const std::vector<token_id>& eog_ids() const { return eog_; }

  protected:
    std::string model_, pre_;
    std::vector<std::string> texts_;
    std::vector<float> scores_;
    std::vector<TokenAttr> attrs_;
    token_id bos_ = -1, eos_ = -1, eot_ = -1, unk_ = -1, pad_ = -1, nl_ = -1;
    bool add_bos_ = false, add_eos_ = false;
    FimIds fim_;
    std::vector<token_id> eog_;  // sorted
};

}  // namespace specula
