// Byte-level BPE tokenizer ("gpt2" model), as llama.cpp's llm_tokenizer_bpe: the pre-tokenizer of
// tokenizer.ggml.pre cuts the fragment into words in the GPT-2 byte alphabet; each word is split
// into characters and adjacent symbols are merged by the rank of "left right" in
// tokenizer.ggml.merges (lowest rank first, ties: leftmost). With ignore_merges (Llama 3) a word
// that is already a token is emitted whole. A final symbol that is not a token falls back to its
// single-byte tokens.
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
    void configure(const GGUFFile& f) override {
        model_ = "gpt2";
        if (!f.has("tokenizer.ggml.merges"))
            fail(f.path(), ": missing key 'tokenizer.ggml.merges'");
        read_merges(f.get_string_array("tokenizer.ggml.merges"));
        pre_ = f.get_string_or("tokenizer.ggml.pre", "default");
        PreTokenizerSpec spec;
        try {
            spec = pre_tokenizer_spec(f.has("tokenizer.ggml.pre") ? pre_ : "");
        } catch (const Error& e) {
            fail(f.path(), ": ", e.what());
        }
        pre_tok_ = std::make_unique<PreTokenizer>(spec.regexes, spec.collapsed);
        ignore_merges_ = spec.ignore_merges;
        clean_spaces_ = spec.clean_spaces;
        add_bos_ = spec.add_bos;
        add_eos_ = false;
        add_space_prefix_ = false;
        bos_ = eos_ = 11;  // llama.cpp's defaults for BPE vocabularies without the keys
        unk_ = -1;
    }

    void encode_fragment(std::string_view fragment, bool after_special,
                         std::vector<token_id>& out) const override {
        for (const std::string& word : pre_tok_->split(fragment)) encode_word(word, out);
    }

    std::string make_piece(token_id id) const override {
        switch (attrs_[id]) {
            case TokenAttr::CONTROL:
            case TokenAttr::UNKNOWN:
            case TokenAttr::USER_DEFINED:
                return texts_[id];
            case TokenAttr::NORMAL:
                return bytes_of(texts_[id]);
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

    // Key of merging two neighbours: the negated merge rank (lower ranks merge first).
    std::optional<int32_t> pair_key(std::string_view word, const Symbol& l, const Symbol& r) const {
        const int32_t r_ = rank(word.substr(l.off, l.n), word.substr(r.off, r.n));
        if (r_ < 0) return std::nullopt;
        return -r_;
    }

    std::vector<Symbol> split_chars(const std::string& word) const {
        std::vector<Symbol> syms;
        if (ignore_merges_ && find_token(word) >= 0) {
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
            // Not a token: each single byte that is one (only printable ASCII can be).
            for (size_t k = 0; k < piece.size(); ++k) {
                const token_id b = find_token(piece.substr(k, 1));
                if (b >= 0) out.push_back(b);
            }
        }
    }

    std::unique_ptr<PreTokenizer> pre_tok_;
    std::vector<std::string> merges_;
    StringIndex ranks_;
    bool ignore_merges_ = false;
};

}  // namespace

std::unique_ptr<VocabTokenizer> make_bpe_tokenizer() {
    return std::make_unique<BpeTokenizer>();
}

}  // namespace specula
