// Byte-level BPE tokenizer ("gpt2" model), as llama.cpp's llm_tokenizer_bpe: the pre-tokenizer of
// tokenizer.ggml.pre cuts the fragment into words in the GPT-2 byte alphabet; each word is split
// into characters and adjacent symbols are merged by the rank of "left right" in
// tokenizer.ggml.merges (lowest rank first, ties: leftmost). With ignore_merges (Llama 3) a word
// that is already a token is emitted whole. A final symbol that is not a token falls back to its
// single-byte tokens.
// Gemma 4's "gemma4" model is this BPE over raw UTF-8: spaces become U+2581, the text is cut
// only into lines and runs of newlines, and a symbol that is not a token falls back to the
// "<0xNN>" tokens of its bytes.
#include <cstdlib>
#include <optional>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace specula {

namespace {

class BpeTokenizer final : public VocabTokenizer {
  protected:
    // "gpt2", or "gemma4": the same BPE with Gemma 4's pre-tokenizer whatever the GGUF's pre
    // says, and no default special ids.
    void configure(const GGUFFile& f) override {
        model_ = f.get_string("tokenizer.ggml.model");
        const bool gemma4 = model_ == "gemma4";
        if (!f.has("tokenizer.ggml.merges"))
            fail(f.path(), ": missing key 'tokenizer.ggml.merges'");
        read_merges(f.get_string_array("tokenizer.ggml.merges"));
        pre_ = gemma4 ? "gemma4" : f.get_string_or("tokenizer.ggml.pre", "default");
        PreTokenizerSpec spec;
        try {
            spec = pre_tokenizer_spec(gemma4 || f.has("tokenizer.ggml.pre") ? pre_ : "");
        } catch (const Error& e) {
            fail(f.path(), ": ", e.what());
        }
        pre_tok_ = std::make_unique<PreTokenizer>(spec.regexes, spec.collapsed, spec.byte_encode);
        ignore_merges_ = spec.ignore_merges;
        byte_encode_ = spec.byte_encode;
        escape_spaces_ = spec.escape_spaces;
        whole_newline_runs_ = spec.whole_newline_runs;
        force_add_bos_ = spec.force_add_bos;
        clean_spaces_ = spec.clean_spaces;
        add_bos_ = spec.add_bos;
        add_eos_ = false;
        add_space_prefix_ = false;
        // llama.cpp's defaults for BPE vocabularies without the keys
        bos_ = gemma4 || spec.no_default_bos ? -1 : 11;
        eos_ = gemma4 ? -1 : 11;
        unk_ = -1;
    }

    void encode_fragment(std::string_view fragment, bool after_special,
                         std::vector<token_id>& out) const override {
        if (!escape_spaces_) {
            for (const std::string& word : pre_tok_->split(fragment)) encode_word(word, out);
            return;
        }
        std::string escaped;
        escaped.reserve(fragment.size());
        for (char c : fragment) {
            if (c == ' ') {
                escaped += "\u2581";
            } else {
                escaped += c;
            }
        }
        for (const std::string& word : pre_tok_->split(escaped)) encode_word(word, out);
    }

    std::string make_piece(token_id id) const override {
        switch (attrs_[id]) {
            case TokenAttr::CONTROL:
            case TokenAttr::UNKNOWN:
            case TokenAttr::USER_DEFINED:
                return texts_[id];
            case TokenAttr::NORMAL:
                return escape_spaces_ ? unescape_spaces(texts_[id]) : bytes_of(texts_[id]);
            case TokenAttr::BYTE:
                return byte_token_piece(texts_[id]);
            default:
                return {};
        }
    }

    token_id find_newline() const override {
        const std::vector<token_id> ids = encode("\n", false, false);
        return ids.empty() ? pad_ : ids[0];
    }

  private:
    // Merge lines are "left right"; a pair's rank is its line number (the first line wins).
    // Symbols are in the byte alphabet and never contain a space, so looking up the joined
    // string is the same as llama.cpp's split at the first space.
    void read_merges(std::vector<std::string> merges) {
        merges_ = std::move(merges);
        ranks_.build(merges_, StringIndex::Duplicates::kKeepFirst);
    }

    int32_t rank(std::string_view left, std::string_view right) const {
        return ranks_.find_pair(left, right);
    }

    // Token text in the byte alphabet -> raw bytes; a codepoint outside the alphabet is written
    // as llama.cpp does: "[UNK_BYTE_0x<hex of its UTF-8>" + the token text + "]".
    static std::string bytes_of(const std::string& text) {
        std::string out;
        for (uint32_t cp : unicode::decode_utf8(text)) {
            const int b = unicode::cpt_to_byte(cp);
            if (b >= 0) {
                out += static_cast<char>(b);
                continue;
            }
            static const char* hex = "0123456789abcdef";
            out += "[UNK_BYTE_0x";
            for (unsigned char c : unicode::encode_utf8(cp)) {
                out += hex[c >> 4];
                out += hex[c & 15];
            }
            out += text + "]";
        }
        return out;
    }

    // U+2581 -> ' ' (a SentencePiece-style token's text).
    static std::string unescape_spaces(const std::string& text) {
        std::string out;
        for (size_t i = 0; i < text.size();) {
            if (text.compare(i, 3, "\u2581") == 0) {
                out += ' ';
                i += 3;
            } else {
                out += text[i++];
            }
        }
        return out;
    }

    // A BYTE token "<0xNN>" stands for byte NN, read as llama.cpp reads it (strtol of the two
    // characters after "<0x": what does not parse counts as 0).
    static std::string byte_token_piece(const std::string& text) {
        const std::string hex = text.size() >= 5 ? text.substr(3, 2) : std::string();
        return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
    }

    // Key of merging two neighbours: the negated merge rank (lower ranks merge first).
    std::optional<int32_t> pair_key(std::string_view word, const Symbol& l, const Symbol& r) const {
        const int32_t r_ = rank(word.substr(l.off, l.n), word.substr(r.off, r.n));
        if (r_ < 0) return std::nullopt;
        return -r_;
    }

    std::vector<Symbol> split_chars(const std::string& word) const {
        std::vector<Symbol> syms;
        const bool whole =
            (ignore_merges_ ||
             (whole_newline_runs_ && word.find_first_not_of('\n') == std::string::npos)) &&
            find_token(word) >= 0;
        if (whole) {
            syms.push_back({-1, -1, 0, word.size()});
            return syms;
        }
        for (size_t off = 0; off < word.size();) {
            const size_t n =
                std::min(unicode::utf8_len(static_cast<uint8_t>(word[off])), word.size() - off);
            const int idx = static_cast<int>(syms.size());
            syms.push_back({idx - 1, off + n == word.size() ? -1 : idx + 1, off, n});
            off += n;
        }
        return syms;
    }

    void encode_word(const std::string& word, std::vector<token_id>& out) const {
        std::vector<Symbol> syms = split_chars(word);
        merge_symbols<int32_t>(
            syms, [&](const Symbol& l, const Symbol& r) { return pair_key(word, l, r); });
        for (const Symbol& s : syms) {
            if (s.n == 0) continue;
            const std::string_view piece = std::string_view(word).substr(s.off, s.n);
            const token_id id = find_token(piece);
            if (id >= 0) {
                out.push_back(id);
                continue;
            }
            // Not a token: each single byte that is one (only printable ASCII can be), or
            // without the byte alphabet each byte's "<0xNN>" token.
            for (size_t k = 0; k < piece.size(); ++k) {
                const token_id b = byte_encode_ ? find_token(piece.substr(k, 1))
                                                : find_token(byte_token_text(piece[k]));
                if (b >= 0) out.push_back(b);
            }
        }
    }

    static std::string byte_token_text(char c) {
        static const char* hex = "0123456789ABCDEF";
        const auto b = static_cast<unsigned char>(c);
        return std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
    }

    std::unique_ptr<PreTokenizer> pre_tok_;
    std::vector<std::string> merges_;
    StringIndex ranks_;
    bool ignore_merges_ = false;
    bool byte_encode_ = true;
    bool escape_spaces_ = false;
    bool whole_newline_runs_ = false;
};

}  // namespace

std::unique_ptr<VocabTokenizer> make_bpe_tokenizer() {
    return std::make_unique<BpeTokenizer>();
}

}  // namespace specula
