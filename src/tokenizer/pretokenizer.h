// Byte-level BPE pre-tokenizer, as llama.cpp runs it: the text is cut by a list of regexes, one
// after the other (each regex splits every piece left by the previous ones; both its matches and
// the gaps between them become pieces), and every piece is then mapped to the GPT-2 byte
// alphabet. The regexes are llama.cpp's for each tokenizer.ggml.pre value and run through PCRE2
// with UTF and UCP. Like llama.cpp, matching sees one piece at a time (lookaheads and `$` stop at
// the piece's end) and non-ASCII whitespace counts as \s everywhere.
// Some pre-tokenizers (gpt-4o) llama.cpp runs through std::regex on a "collapsed" text instead:
// every non-ASCII codepoint becomes one byte naming its class (whitespace 0x0B, number 0xD1,
// letter 0xD2, punctuation 0xD3, mark 0xD4, symbol 0xD5, other 0xD0) and \p{L} / \p{N} in the
// regex become [\xD2A-Za-z] / [\xD10-9]. Such a spec sets `collapsed`, its regexes are written
// in that byte form and run through PCRE2 without UTF; case distinctions outside ASCII are gone
// there, as in llama.cpp.
#pragma once

#include <cstdint>
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
    bool collapsed = false;            // regexes run on the collapsed text (see above)
    bool byte_encode = true;          // words in the GPT-2 byte alphabet; false: raw UTF-8 (gemma4)
    bool escape_spaces = false;       // ' ' becomes U+2581 before splitting (gemma4)
    bool whole_newline_runs = false;  // a word of newlines that is a token is kept whole (gemma4)
    bool force_add_bos = false;       // add_bos whatever the GGUF says (gemma4)
    bool no_default_bos = false;      // no BOS unless the GGUF names one (glm4)
};

// The spec for `pre` ("" means llama.cpp's default); throws Error listing the supported names.
PreTokenizerSpec pre_tokenizer_spec(const std::string& pre);

// The tokenizer.ggml.pre values pre_tokenizer_spec accepts, comma separated.
std::string supported_pre_tokenizers();

class PreTokenizer {
  public:
    // Compiles the regexes (byte regexes over the collapsed text when `collapsed`); throws Error
    // naming the regex that PCRE2 rejects. Without `byte_encode` split() returns the words in
    // UTF-8 as they are.
    explicit PreTokenizer(const std::vector<std::string>& regexes, bool collapsed = false,
                          bool byte_encode = true);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // Words of `text`, each in the GPT-2 byte alphabet (UTF-8 encoded) unless constructed
    // without byte_encode.
    std::vector<std::string> split(std::string_view text) const;

  private:
    struct Regex;
    char collapse(uint32_t cp, void* match_data) const;
    std::vector<std::unique_ptr<Regex>> regexes_;
    std::unique_ptr<Regex> classes_;  // collapsed: the codepoint classifier
    bool collapsed_ = false;
    bool byte_encode_ = true;
};

}  // namespace specula
