// Byte-level BPE pre-tokenizer, as llama.cpp runs it: the text is cut by a list of regexes, one
// after the other (each regex splits every piece left by the previous ones; both its matches and
// the gaps between them become pieces), and every piece is then mapped to the GPT-2 byte
// alphabet. The regexes are llama.cpp's for each tokenizer.ggml.pre value and run through PCRE2
// with UTF and UCP. Like llama.cpp, matching sees one piece at a time (lookaheads and `$` stop at
// the piece's end) and non-ASCII whitespace counts as \s everywhere.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specula {

// How a tokenizer.ggml.pre value configures the BPE tokenizer.
struct PreTokenizerSpec {
    std::string name;                  // canonical name (e.g. "llama3" for "llama-bpe")
    std::vector<std::string> regexes;  // applied in order
    bool ignore_merges = false;        // a word that is already a token is emitted whole
    bool clean_spaces = true;          // decode removes spaces before punctuation
    bool add_bos = false;              // default for add_bos when the GGUF has no key
};

// The spec for `pre` ("" means llama.cpp's default); throws Error listing the supported names.
PreTokenizerSpec pre_tokenizer_spec(const std::string& pre);

// The tokenizer.ggml.pre values pre_tokenizer_spec accepts, comma separated.
std::string supported_pre_tokenizers();

class PreTokenizer {
  public:
    // Compiles the regexes; throws Error naming the regex that PCRE2 rejects.
    explicit PreTokenizer(const std::vector<std::string>& regexes);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // Words of `text`, each in the GPT-2 byte alphabet (UTF-8 encoded).
    std::vector<std::string> split(std::string_view text) const;

  private:
    struct Regex;
    std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace specula
