// Tokenizer factory and the model-independent half of llama.cpp's tokenize/detokenize: special
// tokens are cut out of the text first (longest token text first, each token over every fragment
// left so far), the plain fragments go to the model's word-level tokenizer, and detokenization
// concatenates cached pieces with the SPM leading-space rule and clean_spaces.
#include <algorithm>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer_impl.h"

namespace specula {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile& f) {
    if (!f.has("tokenizer.ggml.model")) fail(f.path(), ": missing key 'tokenizer.ggml.model'");
    const std::string name = f.get_string("tokenizer.ggml.model");
    std::unique_ptr<VocabTokenizer> tok;
    if (name == "llama") {
        tok = make_spm_tokenizer();
    } else if (name == "gpt2" || name == "gemma4") {
        tok = make_bpe_tokenizer();
    } else {
        fail(f.path(), ": tokenizer.ggml.model '", name,
             "' is not supported (supported: llama, gpt2, gemma4)");
    }
    tok->load(f);
    return tok;
}

bool Tokenizer::is_eog(token_id id) const {
    return std::binary_search(eog_.begin(), eog_.end(), id);
}

token_id VocabTokenizer::find_token(std::string_view text) const {
    return token_index_.find(text);
}

bool VocabTokenizer::is_special_attr(token_id id) const {
    return attrs_[id] == TokenAttr::CONTROL || attrs_[id] == TokenAttr::UNKNOWN;
}

// isspace() in the C locale.
static bool is_c_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

namespace {

// Whether bytes [at, at + n) overlap one of `plain` (sorted, disjoint).
bool overlaps(std::span<const TextSpan> plain, size_t at, size_t n) {
    const auto it = std::upper_bound(plain.begin(), plain.end(), at,
                                     [](size_t a, const TextSpan& s) { return a < s.end; });
    return it != plain.end() && it->begin < at + n;
}

}  // namespace

std::vector<VocabTokenizer::Fragment> VocabTokenizer::partition(
    std::string_view text, bool parse_special, std::span<const TextSpan> plain) const {
    std::vector<Fragment> frags;
    if (!text.empty()) frags.push_back({-1, 0, text.size()});
    std::vector<Fragment> next;
    for (token_id id : special_tokens_) {
        // CONTROL and UNKNOWN tokens only with parse_special; USER_DEFINED always.
        if (!parse_special && is_special_attr(id)) continue;
        const bool guarded = !plain.empty() && is_special_attr(id);
        const std::string& needle = texts_[id];
        next.clear();
        for (const Fragment& fr : frags) {
            if (fr.token >= 0) {
                next.push_back(fr);
                continue;
            }
            size_t off = fr.off, len = fr.len, from = 0;
            while (len > 0) {
                const size_t m = text.substr(off, len).find(needle, from);
                if (m == std::string_view::npos) break;
                if (guarded && overlaps(plain, off + m, needle.size())) {
                    from = m + 1;  // text there: look further on
                    continue;
                }
                size_t left = m;
                if (strip_[id] & kLstrip) {
                    while (left > 0 && is_c_space(text[off + left - 1])) --left;
                }
                if (left > 0) next.push_back({-1, off, left});
                next.push_back({id, 0, 0});
                size_t r_off = off + m + needle.size();
                size_t r_len = off + len - r_off;
                if (strip_[id] & kRstrip) {
                    while (r_len > 0 && is_c_space(text[r_off])) ++r_off, --r_len;
                }
                off = r_off;
                len = r_len;
                from = 0;
            }
            if (len > 0) next.push_back({-1, off, len});
        }
        frags.swap(next);
    }
    return frags;
}

std::vector<token_id> VocabTokenizer::encode(std::string_view text, bool add_special,
                                             bool parse_special) const {
    return encode_parts(text, add_special, partition(text, parse_special, {}));
}

std::vector<token_id> VocabTokenizer::encode(std::string_view text, bool add_special,
                                             std::span<const TextSpan> plain) const {
    return encode_parts(text, add_special, partition(text, true, plain));
}

std::vector<token_id> VocabTokenizer::encode_parts(std::string_view text, bool add_special,
                                                   const std::vector<Fragment>& parts) const {
    std::vector<token_id> out;
    if (add_special && add_bos_) {
        if (bos_ < 0) fail("tokenizer: add_bos is set but the vocabulary has no BOS token");
        out.push_back(bos_);
    }
    bool after_special = true;
    for (const Fragment& fr : parts) {
        if (fr.token >= 0) {
            out.push_back(fr.token);
            after_special = true;
        } else {
            encode_fragment(text.substr(fr.off, fr.len), after_special, out);
            after_special = false;
        }
    }
    if (add_special && add_eos_) {
        if (eos_ < 0) fail("tokenizer: add_eos is set but the vocabulary has no EOS token");
        out.push_back(eos_);
    }
    return out;
}

std::string VocabTokenizer::token_to_piece(token_id id, bool special) const {
    if (id < 0 || id >= n_vocab()) {
        fail("tokenizer: token id ", id, " is out of range [0, ", n_vocab(), ")");
    }
    if (!special && is_special_attr(id)) return {};
    return pieces_[id];
}

std::string VocabTokenizer::decode(const std::vector<token_id>& tokens, bool remove_special,
                                   bool unparse_special) const {
    size_t begin = 0, end = tokens.size();
    bool remove_space = add_space_prefix_;
    if (remove_special && add_bos_ && end > 0 && tokens[0] == bos_) {
        remove_space = false;
        begin = 1;
    }
    if (remove_special && add_eos_ && end > begin && tokens[end - 1] == eos_) --end;

    std::string out;
    for (size_t i = begin; i < end; ++i) {
        std::string piece = token_to_piece(tokens[i], unparse_special);
        // Only the very first token may lose its leading space (the SPM prefix space).
        if (remove_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
        remove_space = false;
        out += piece;
    }
    return clean_spaces_ ? clean_spaces(std::move(out)) : out;
}

// Pass 1: " ?" " !" " ." " ," lose the space.
static std::string drop_space_before_punct(const std::string& s) {
    std::string out(1, s[0]);
    for (size_t i = 1; i < s.size(); ++i) {
        const char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) out.pop_back();
        out += x;
    }
    return out;
}

// Pass 2: " ' " becomes "'". The space after the quote is consumed and does not count as a space
// before the next character.
static std::string drop_spaces_around_quote(std::string s) {
    std::string out(1, s[0]);
    for (size_t i = 1; i < s.size(); ++i) {
        const char x = s[i];
        if (x == '\'' && i + 1 < s.size() && s[i - 1] == ' ' && s[i + 1] == ' ') {
            out.pop_back();
            s[++i] = '\0';
        }
        out += x;
    }
    return out;
}

// Pass 3: " 's" " 'm" " 're" " 've" lose the space (" 't" " 'd" " 'll" keep it).
static std::string drop_space_before_contraction(const std::string& s) {
    std::string out(1, s[0]);
    const size_t n = s.size();
    for (size_t i = 1; i < n; ++i) {
        const char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            const char x1 = s[i + 1];
            if (x1 == 's' || x1 == 'm') {
                out.pop_back();
            } else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
                const char x2 = s[i + 2];
                if ((x1 == 'r' || x1 == 'v') && x2 == 'e') out.pop_back();
            }
        }
        out += x;
    }
    return out;
}

std::string clean_spaces(std::string s) {
    if (s.empty()) return s;
    s = drop_space_before_punct(s);
    s = drop_spaces_around_quote(std::move(s));
    return drop_space_before_contraction(s);
}

}  // namespace specula
