// SentencePiece-style tokenizer ("llama" model), as llama.cpp's llm_tokenizer_spm: the fragment
// gets a "▁" prefix (after BOS, at the start and after a special token, when add_space_prefix),
// spaces become "▁", the text is split into UTF-8 characters and adjacent symbols are merged while
// their concatenation is a token, highest score first (ties: leftmost). A final symbol that is
// not a token is emitted as byte tokens <0xNN>.
#include <optional>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace specula {

namespace {

const std::string kSpace = "\xE2\x96\x81";  // "▁"

class SpmTokenizer final : public VocabTokenizer {
  protected:
    void configure(const GGUFFile& f) override {
        model_ = "llama";
        pre_.clear();
        bos_ = 1;
        eos_ = 2;
        unk_ = 0;
        add_space_prefix_ = true;
        clean_spaces_ = false;
        add_bos_ = true;
        add_eos_ = false;
    }

    void encode_fragment(std::string_view fragment, bool after_special,
                         std::vector<token_id>& out) const override {
        std::string text;
        if (add_space_prefix_ && after_special) text = kSpace;
        for (char c : fragment) {
            if (c == ' ') {
                text += kSpace;
            } else {
                text += c;
            }
        }
        tokenize_escaped(text, out);
    }

    std::string make_piece(token_id id) const override {
        const std::string& t = texts_[id];
        switch (attrs_[id]) {
            case TokenAttr::CONTROL:
            case TokenAttr::UNKNOWN:
            case TokenAttr::USER_DEFINED:
                return t;
            case TokenAttr::NORMAL:
                return unescape(t);
            case TokenAttr::BYTE:
                return std::string(1, static_cast<char>(byte_value(t)));
            default:
                return {};
        }
    }

    token_id find_newline() const override {
        token_id id = find_token("<0x0A>");
        if (id < 0) id = find_token("\n");
        return id >= 0 ? id : pad_;
    }

  private:
    static std::string unescape(const std::string& t) {
        std::string s;
        for (size_t i = 0; i < t.size();) {
            if (t.compare(i, kSpace.size(), kSpace) == 0) {
                s += ' ';
                i += kSpace.size();
            } else {
                s += t[i++];
            }
        }
        return s;
    }

    // The byte of a <0xNN> token: the hex digits at offset 3 (strtol-style, stops at a non-digit).
    static int byte_value(const std::string& t) {
        int v = 0;
        for (size_t i = 3; i < t.size() && i < 5; ++i) {
            const char c = t[i];
            int d;
            if (c >= '0' && c <= '9') {
                d = c - '0';
            } else if (c >= 'a' && c <= 'f') {
                d = c - 'a' + 10;
            } else if (c >= 'A' && c <= 'F') {
                d = c - 'A' + 10;
            } else {
                break;
            }
            v = v * 16 + d;
        }
        return v;
    }

    token_id byte_token(uint8_t b) const {
        static const char* hex = "0123456789ABCDEF";
        const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        token_id id = find_token(name);
        if (id < 0) id = find_token(std::string_view(reinterpret_cast<const char*>(&b), 1));
        if (id < 0) id = unk_;
        if (id < 0) fail("tokenizer: no byte token <0x", name + 3, " and no <unk> token");
        return id;
    }

    // Key of merging two neighbours: the score of the merged token, if it is one.
    std::optional<float> pair_key(std::string_view text, const Symbol& l, const Symbol& r) const {
        const token_id id = find_token(text.substr(l.off, l.n + r.n));
        if (id < 0) return std::nullopt;
        return token_score(id);
    }

    void tokenize_escaped(const std::string& text, std::vector<token_id>& out) const {
        std::vector<Symbol> syms;
        for (size_t off = 0; off < text.size();) {
            const size_t n =
                std::min(unicode::utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
            const int idx = static_cast<int>(syms.size());
            syms.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, off, n});
            off += n;
        }
        merge_symbols<float>(
            syms, [&](const Symbol& l, const Symbol& r) { return pair_key(text, l, r); });
        for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
            const Symbol& s = syms[i];
            const std::string_view piece = std::string_view(text).substr(s.off, s.n);
            const token_id id = find_token(piece);
            if (id >= 0) {
                out.push_back(id);
                continue;
            }
            for (char c : piece) out.push_back(byte_token(static_cast<uint8_t>(c)));
        }
    }
};

}  // namespace

std::unique_ptr<VocabTokenizer> make_spm_tokenizer() {
    return std::make_unique<SpmTokenizer>();
}

}  // namespace specula
