// The PCRE2 pre-tokenizer against two re-implementations of what llama.cpp does, on seeded random
// texts:
//  - its hand-written splitters for the GPT-2 and Llama 3 regexes (a state machine over codepoint
//    classes);
//  - its generic path, std::regex over a "collapsed" text (every non-ASCII codepoint replaced by
//    one byte standing for its class: letter, number, punctuation, whitespace, other) with \p{..}
//    rewritten to those bytes, or std::wregex when a regex has literal non-ASCII characters.
// Codepoint classes come from single-character PCRE2 property tests; White_Space is llama.cpp's.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

using namespace specula;

namespace {

class CharClass {
  public:
    explicit CharClass(const char* pattern) {
        int err;
        PCRE2_SIZE off;
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                              PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
        md_ = pcre2_match_data_create(1, nullptr);
    }
    ~CharClass() {
        pcre2_match_data_free(md_);
        pcre2_code_free(code_);
    }
    bool operator()(uint32_t cp) const {
        const std::string s = unicode::encode_utf8(cp);
        return pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                           PCRE2_ANCHORED, md_, nullptr) > 0;
    }

  private:
    pcre2_code* code_;
    pcre2_match_data* md_;
};

bool is_white_space(uint32_t c) {
    return (c >= 9 && c <= 13) || c == ' ' || unicode::is_non_ascii_space(c);
}

struct Flags {
    bool letter = false, number = false, space = false, valid = false;
};

class Classifier {
  public:
    Flags operator()(const std::vector<uint32_t>& cps, size_t i) const {
        Flags f;
        if (i >= cps.size()) return f;  // out of range: no flags at all
        const uint32_t c = cps[i];
        f.valid = true;
        f.letter = letter_(c);
        f.number = number_(c);
        f.space = is_white_space(c);
        return f;
    }

  private:
    CharClass letter_{"^\\p{L}$"}, number_{"^\\p{N}$"};
};

uint32_t at(const std::vector<uint32_t>& cps, size_t i) {
    return i < cps.size() ? cps[i] : 0xFFFFFFFF;
}

uint32_t lower_ascii(uint32_t c) {
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd) at i, or 0.
size_t contraction(const std::vector<uint32_t>& cps, size_t i, bool any_case) {
    if (at(cps, i) != '\'' || i + 1 >= cps.size()) return 0;
    auto low = [&](uint32_t c) { return any_case ? lower_ascii(c) : c; };
    const uint32_t c1 = low(at(cps, i + 1));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (i + 2 >= cps.size()) return 0;
    const uint32_t c2 = low(at(cps, i + 2));
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

// Trailing whitespace handling shared by both: \s+(?!\S) leaves the last space for the next
// word when more follows, else \s+ takes the run.
size_t whitespace_run(const std::vector<uint32_t>& cps, size_t pos, const Classifier& cls) {
    size_t n = 0;
    while (cls(cps, pos + n).space) ++n;
    if (n > 1 && pos + n < cps.size()) return n - 1;
    return n;
}

std::vector<size_t> split_gpt2(const std::vector<uint32_t>& cps, const Classifier& cls) {
    std::vector<size_t> lens;
    size_t pos = 0;
    while (pos < cps.size()) {
        const size_t start = pos;
        if (size_t c = contraction(cps, pos, false)) {
            lens.push_back(c);
            pos += c;
            continue;
        }
        const bool sp = cps[pos] == ' ';
        Flags f2 = sp ? cls(cps, pos + 1) : cls(cps, pos);
        auto run = [&](auto pred) {
            pos += sp;
            while (pred(f2)) f2 = cls(cps, ++pos);
            lens.push_back(pos - start);
        };
        if (f2.letter) {
            run([](const Flags& f) { return f.letter; });
        } else if (f2.number) {
            run([](const Flags& f) { return f.number; });
        } else if (f2.valid && !f2.space && !f2.letter && !f2.number) {
            run([](const Flags& f) { return f.valid && !f.space && !f.letter && !f.number; });
        } else if (size_t n = whitespace_run(cps, pos, cls)) {
            lens.push_back(n);
            pos += n;
        } else {
            lens.push_back(1);
            ++pos;
        }
    }
    return lens;
}

std::vector<size_t> split_llama3(const std::vector<uint32_t>& cps, const Classifier& cls) {
    std::vector<size_t> lens;
    size_t pos = 0;
    while (pos < cps.size()) {
        const size_t start = pos;
        const uint32_t c = cps[pos];
        const Flags f = cls(cps, pos);
        if (size_t k = contraction(cps, pos, true)) {
            lens.push_back(k);
            pos += k;
            continue;
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if (c != '\r' && c != '\n' && !f.number && (f.letter || cls(cps, pos + 1).letter)) {
            ++pos;
            while (cls(cps, pos).letter) ++pos;
            lens.push_back(pos - start);
            continue;
        }
        // \p{N}{1,3}
        if (f.number) {
            size_t n = 0;
            while (n < 3 && cls(cps, pos + n).number) ++n;
            lens.push_back(n);
            pos += n;
            continue;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        const bool sp = c == ' ';
        Flags f2 = sp ? cls(cps, pos + 1) : f;
        auto other = [](const Flags& g) { return g.valid && !g.space && !g.letter && !g.number; };
        if (other(f2)) {
            pos += sp;
            while (other(f2)) f2 = cls(cps, ++pos);
            while (at(cps, pos) == '\r' || at(cps, pos) == '\n') ++pos;
            lens.push_back(pos - start);
            continue;
        }
        // \s*[\r\n]+ : up to the last CR/LF of the whitespace run.
        size_t n = 0, last_nl = 0;
        while (cls(cps, pos + n).space) {
            if (cps[pos + n] == '\r' || cps[pos + n] == '\n') last_nl = n + 1;
            ++n;
        }
        if (last_nl > 0) {
            lens.push_back(last_nl);
            pos += last_nl;
            continue;
        }
        if (size_t w = whitespace_run(cps, pos, cls)) {
            lens.push_back(w);
            pos += w;
            continue;
        }
        lens.push_back(1);
        ++pos;
    }
    return lens;
}

std::vector<std::string> words_of(const std::vector<uint32_t>& cps,
                                  const std::vector<size_t>& lens) {
    std::vector<std::string> words;
    size_t pos = 0;
    for (size_t n : lens) {
        std::string w;
        for (size_t i = pos; i < pos + n; ++i) {
            for (unsigned char b : unicode::encode_utf8(cps[i])) {
                unicode::append_utf8(w, unicode::byte_to_cpt(b));
            }
        }
        words.push_back(w);
        pos += n;
    }
    return words;
}

std::vector<std::string> random_texts(uint32_t seed, int count,
                                      const std::vector<std::string>& more_atoms = {}) {
    std::vector<std::string> atoms = {"a",
                                      "B",
                                      "xyz",
                                      "S",
                                      "s",
                                      "t",
                                      "RE",
                                      "ll",
                                      "Ve",
                                      "m",
                                      "d",
                                      "'",
                                      "'",
                                      "1",
                                      "22",
                                      "333",
                                      "4444",
                                      " ",
                                      " ",
                                      "  ",
                                      "   ",
                                      "\t",
                                      "\n",
                                      "\r",
                                      "\r\n",
                                      "\n\n",
                                      ".",
                                      ",",
                                      "!!",
                                      "?",
                                      "-",
                                      "(",
                                      ")",
                                      "\"",
                                      "#",
                                      "$",
                                      "\xC3\xA9",
                                      "\xC3\x9F",
                                      "\xD0\x96\xD1\x8B",
                                      "\xE4\xB8\xAD",
                                      "\xE3\x81\x82",
                                      "\xF0\x9F\xA6\x99",
                                      "\xE2\x80\x8D",
                                      "\xCC\x81",
                                      "\xC2\xA0",
                                      "\xE3\x80\x80",
                                      "\xC2\x85",
                                      "\xE1\xA0\x8E",
                                      "\xD9\xA3",
                                      "\xC2\xBD",
                                      "\xE2\x85\xA0",
                                      "\xEF\xBC\x81",
                                      "\xE2\x80\xA8",
                                      "\x0B",
                                      "\x0C",
                                      "\x1F"};
    atoms.insert(atoms.end(), more_atoms.begin(), more_atoms.end());
    std::mt19937 rng(seed);
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) {
        std::string t;
        const int n = 1 + static_cast<int>(rng() % 30);
        for (int k = 0; k < n; ++k) t += atoms[rng() % atoms.size()];
        out.push_back(t);
    }
    return out;
}

void check_against(const char* pre,
                   std::vector<size_t> (*oracle)(const std::vector<uint32_t>&, const Classifier&)) {
    PreTokenizer pt(pre_tokenizer_spec(pre).regexes);
    Classifier cls;
    int ok = 0, n = 0;
    std::string first_bad;
    for (const std::string& t : random_texts(7, 3000)) {
        const auto cps = unicode::decode_utf8(t);
        const auto want = words_of(cps, oracle(cps, cls));
        ++n;
        if (pt.split(t) == want) {
            ++ok;
        } else if (first_bad.empty()) {
            first_bad = t;
        }
    }
    EXPECT_EQ(ok, n) << pre << ": first differing text '" << first_bad << "'";
}

// ---------------------------------------------------------------------------------------------
// llama.cpp's std::regex path

constexpr char kNumber = '\xD1', kLetter = '\xD2', kPunct = '\xD3', kMark = '\xD4',
               kSymbol = '\xD5', kOther = '\xD0';

std::string collapse_text(const std::vector<uint32_t>& cps) {
    static const CharClass letter("^\\p{L}$"), number("^\\p{N}$"), punct("^\\p{P}$"),
        mark("^\\p{M}$"), symbol("^\\p{S}$");
    std::string out;
    for (uint32_t c : cps) {
        if (c < 128) {
            out += static_cast<char>(c);
        } else if (is_white_space(c)) {
            out += '\x0B';
        } else if (letter(c)) {
            out += kLetter;
        } else if (number(c)) {
            out += kNumber;
        } else if (punct(c)) {
            out += kPunct;
        } else if (mark(c)) {
            out += kMark;
        } else if (symbol(c)) {
            out += kSymbol;
        } else {
            out += kOther;
        }
    }
    return out;
}

// \p{N}, \p{L}, \p{P}, \p{M}, \p{S} -> the class byte plus llama.cpp's ASCII members (its \p{S}
// lacks '~'), bracketed unless already inside a bracket expression.
std::string collapse_regex(const std::string& re) {
    const std::pair<std::string, std::string> cats[] = {
        {"\\p{N}", std::string(1, kNumber) + "0-9"},
        {"\\p{L}", std::string(1, kLetter) + "A-Za-z"},
        {"\\p{P}", std::string(1, kPunct) + "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
        {"\\p{M}", std::string(1, kMark)},
        {"\\p{S}", std::string(1, kSymbol) + "\\$\\+<->^`\\|"}};
    std::string out;
    bool inside = false;
    for (size_t i = 0; i < re.size(); ++i) {
        if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) {
            out += '[';
            inside = true;
            continue;
        }
        if (inside && re[i] == ']' && re[i - 1] != '\\') {
            out += ']';
            inside = false;
            continue;
        }
        bool replaced = false;
        for (const auto& [pat, rep] : cats) {
            if (re.compare(i, pat.size(), pat) == 0) {
                out += inside ? rep : "[" + rep + "]";
                i += pat.size() - 1;
                replaced = true;
                break;
            }
        }
        if (!replaced) out += re[i];
    }
    return out;
}

// PCRE2's \x{HHHH} escapes as the characters themselves (std::wregex has no such syntax).
std::wstring unescape_wide(const std::string& re) {
    std::wstring out;
    for (size_t i = 0; i < re.size();) {
        if (re.compare(i, 3, "\\x{") == 0) {
            const size_t end = re.find('}', i);
            out += static_cast<wchar_t>(std::stoul(re.substr(i + 3, end - i - 3), nullptr, 16));
            i = end + 1;
        } else {
            out += static_cast<wchar_t>(static_cast<unsigned char>(re[i++]));
        }
    }
    return out;
}

// Matches and the gaps between them, within each piece, as codepoint lengths.
template <class Char>
std::vector<size_t> split_stl(const std::basic_string<Char>& text, const std::basic_regex<Char>& re,
                              const std::vector<size_t>& pieces) {
    std::vector<size_t> out;
    size_t start = 0;
    for (size_t len : pieces) {
        const Char* b = text.data() + start;
        size_t last = 0;
        for (std::regex_iterator<const Char*> it(b, b + len, re), end; it != end; ++it) {
            const size_t pos = it->position(), n = it->length();
            if (n == 0) continue;
            if (pos > last) out.push_back(pos - last);
            out.push_back(n);
            last = pos + n;
        }
        if (last < len) out.push_back(len - last);
        start += len;
    }
    return out;
}

std::vector<size_t> split_like_llama_cpp(const std::vector<uint32_t>& cps,
                                         const std::vector<std::string>& regexes) {
    const std::string collapsed = collapse_text(cps);
    std::wstring wide;
    for (uint32_t c : cps) wide += static_cast<wchar_t>(is_white_space(c) && c > 127 ? 0x0B : c);
    std::vector<size_t> pieces = {cps.size()};
    for (const std::string& re : regexes) {
        if (re.find("\\p{") != std::string::npos) {
            pieces = split_stl(collapsed, std::regex(collapse_regex(re)), pieces);
        } else {
            pieces = split_stl(wide, std::wregex(unescape_wide(re)), pieces);
        }
    }
    return pieces;
}

class StdRegexPath : public ::testing::TestWithParam<const char*> {};

TEST_P(StdRegexPath, PcreSplitMatches) {
    const PreTokenizerSpec spec = pre_tokenizer_spec(GetParam());
    PreTokenizer pt(spec.regexes);
    int ok = 0, n = 0;
    std::string first_bad;
    for (const std::string& t : random_texts(11, 400)) {
        const auto cps = unicode::decode_utf8(t);
        ++n;
        if (pt.split(t) == words_of(cps, split_like_llama_cpp(cps, spec.regexes))) {
            ++ok;
        } else if (first_bad.empty()) {
            first_bad = t;
        }
    }
    EXPECT_EQ(ok, n) << GetParam() << ": first differing text '" << first_bad << "'";
}

INSTANTIATE_TEST_SUITE_P(AllPre, StdRegexPath,
                         ::testing::Values("default", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm",
                                           "deepseek-coder", "falcon", "starcoder"),
                         [](const auto& info) {
                             std::string s = info.param;
                             for (char& c : s) {
                                 if (c == '-') c = '_';
                             }
                             return s;
                         });

// gpt-4o (o200k): Specula's regex is written already collapsed; llama.cpp (ik_llama.cpp
// 8337e4c) collapses this one, its case classes spelled with lookaheads, at run time.
TEST(PreTokenizer, Gpt4oMatchesLlamaCppCollapsedRegex) {
    const std::string ik_regex =
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    const PreTokenizerSpec spec = pre_tokenizer_spec("gpt-4o");
    ASSERT_TRUE(spec.collapsed);
    EXPECT_FALSE(spec.clean_spaces);
    EXPECT_EQ(pre_tokenizer_spec("llama4").name, "gpt-4o");
    PreTokenizer pt(spec.regexes, spec.collapsed);
    int ok = 0, n = 0;
    std::string first_bad;
    auto texts = random_texts(13, 1500);
    texts.push_back("HELLOworld helloWORLD \xD0\xBF\xD1\x80\xD0\x98\xD0\x92 I'M it's x/\n");
    for (const std::string& t : texts) {
        const auto cps = unicode::decode_utf8(t);
        ++n;
        if (pt.split(t) == words_of(cps, split_like_llama_cpp(cps, {ik_regex}))) {
            ++ok;
        } else if (first_bad.empty()) {
            first_bad = t;
        }
    }
    EXPECT_EQ(ok, n) << "gpt-4o: first differing text '" << first_bad << "'";
}

// deepseek-v3: ik_llama.cpp 8337e4c runs the first and third regexes on the collapsed text, the
// second (literal kana and CJK ranges) through std::wregex; Specula's are PCRE2 UTF regexes
// with '~' taken out of \p{S} as the collapsed ASCII table does.
TEST(PreTokenizer, DeepseekV3MatchesLlamaCppRegexes) {
    const std::vector<std::string> ik_regexes = {
        "\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
        "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
    const PreTokenizerSpec spec = pre_tokenizer_spec("deepseek-v3");
    EXPECT_FALSE(spec.clean_spaces);
    PreTokenizer pt(spec.regexes);
    // '~' and ASCII symbols, kana, a symbol and a mark outside ASCII, a fullwidth digit
    const std::vector<std::string> more = {"~",
                                           "~~",
                                           "+",
                                           "^",
                                           "`",
                                           "|",
                                           "<=",
                                           "\xE3\x81\x8B",
                                           "\xE3\x82\xAB",
                                           "\xE2\x82\xAC",
                                           "\xE2\x88\x91",
                                           "\xE0\xA4\x95\xE0\xA5\x8D",
                                           "\xEF\xBC\x91",
                                           "12345"};
    int ok = 0, n = 0;
    std::string first_bad;
    for (const std::string& t : random_texts(17, 600, more)) {
        const auto cps = unicode::decode_utf8(t);
        ++n;
        if (pt.split(t) == words_of(cps, split_like_llama_cpp(cps, ik_regexes))) {
            ++ok;
        } else if (first_bad.empty()) {
            first_bad = t;
        }
    }
    EXPECT_EQ(ok, n) << "deepseek-v3: first differing text '" << first_bad << "'";
}

// gemma4: lines and runs of newlines, in raw UTF-8 (ik_llama.cpp splits at '\n' only).
TEST(PreTokenizer, Gemma4SplitsOnlyAtNewlines) {
    const PreTokenizerSpec spec = pre_tokenizer_spec("gemma4");
    EXPECT_FALSE(spec.byte_encode);
    EXPECT_TRUE(spec.escape_spaces);
    EXPECT_TRUE(spec.force_add_bos);
    PreTokenizer pt(spec.regexes, spec.collapsed, spec.byte_encode);
    const std::vector<std::string> want = {"a b\t\xC3\xA9 ", "\n\n", "\r x\xE2\x80\x83", "\n"};
    EXPECT_EQ(pt.split("a b\t\xC3\xA9 \n\n\r x\xE2\x80\x83\n"), want);
    EXPECT_TRUE(pt.split("").empty());
}

TEST(PreTokenizer, Gpt2RegexMatchesLlamaCppSplitter) {
    check_against("gpt-2", split_gpt2);
}

TEST(PreTokenizer, Llama3RegexMatchesLlamaCppSplitter) {
    check_against("llama-bpe", split_llama3);
}

TEST(PreTokenizer, UnknownPreIsAnError) {
    EXPECT_THROW(pre_tokenizer_spec("nonesuch"), std::exception);
    EXPECT_EQ(pre_tokenizer_spec("llama-bpe").name, "llama3");
    EXPECT_TRUE(pre_tokenizer_spec("llama-bpe").ignore_merges);
    EXPECT_FALSE(pre_tokenizer_spec("qwen2").clean_spaces);
    EXPECT_TRUE(pre_tokenizer_spec("gpt-2").clean_spaces);
    EXPECT_EQ(pre_tokenizer_spec("chatglm-bpe").name, "glm4");
    EXPECT_EQ(pre_tokenizer_spec("hunyuan-dense").name, "deepseek-v3");
    EXPECT_TRUE(pre_tokenizer_spec("glm4").no_default_bos);
    EXPECT_FALSE(pre_tokenizer_spec("glm4").ignore_merges);
}

}  // namespace
