// The pre-tokenizer regexes of each tokenizer.ggml.pre value and the PCRE2 splitter (see
// pretokenizer.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "common/error.h"
#include "tokenizer/unicode.h"

namespace specula {

namespace {

// Llama 3: contractions, letters with one leading non-letter, digits in groups of up to three.
const char* const kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but single digits.
const char* const kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-2.
const char* const kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// CJK ideographs, the range below them and Hangul, as DeepSeek's tokenizers split them.
const char* const kCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// DeepSeek LLM's letters: the cased-letter ranges of its tokenizer.json.
const char* const kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";
// DeepSeek LLM's punctuation: ASCII and full-width punctuation, quotes, CJK marks.
const char* const kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

// DeepSeek V3: kana and the CJK ideographs as its tokenizer.json lists them.
const char* const kDeepseekV3Cjk = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
// DeepSeek V3's words. llama.cpp runs this regex on its collapsed text, where the ASCII '~' is in
// neither \p{P} nor \p{S} (its ASCII table for \p{S} lacks it); the classes here leave '~' out
// the same way.
const char* const kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|(?:~|[^\r\n\p{L}\p{P}\p{S}])?[\p{L}\p{M}]+)"
    R"(| ?(?:(?!~)[\p{P}\p{S}])+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// o200k (gpt-4o, gpt-oss) as llama.cpp runs it: on the collapsed text (pretokenizer.h), with
// \p{L} = [\xD2A-Za-z] and \p{N} = [\xD10-9]; an "upper case" letter is a letter that is not a-z,
// a "lower case" one a letter that is not A-Z, so every non-ASCII letter is both.
#define SPECULA_L R"(\x{D2}A-Za-z)"
#define SPECULA_N R"(\x{D1}0-9)"
#define SPECULA_UPPER R"(((?=[)" SPECULA_L R"(])([^a-z])))"
#define SPECULA_LOWER R"(((?=[)" SPECULA_L R"(])([^A-Z])))"
#define SPECULA_CONTR R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
const char* const kGpt4oCollapsed =
    R"([^\r\n)" SPECULA_L SPECULA_N R"(]?)" SPECULA_UPPER "*" SPECULA_LOWER "+" SPECULA_CONTR
    R"(|[^\r\n)" SPECULA_L SPECULA_N R"(]?)" SPECULA_UPPER "+" SPECULA_LOWER "*" SPECULA_CONTR
    R"(|[)" SPECULA_N R"(]{1,3}| ?[^\s)" SPECULA_L SPECULA_N
    R"(]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
#undef SPECULA_L
#undef SPECULA_N
#undef SPECULA_UPPER
#undef SPECULA_LOWER
#undef SPECULA_CONTR

PreTokenizerSpec make_spec(std::string name, std::vector<std::string> regexes) {
    PreTokenizerSpec s;
    s.name = std::move(name);
    s.regexes = std::move(regexes);
    return s;
}

PreTokenizerSpec spec_by_canonical(const std::string& pre) {
    if (pre == "default") {
        return make_spec(pre, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"});
    }
    if (pre == "llama3") {
        auto s = make_spec(pre, {kLlama3});
        s.ignore_merges = true;
        s.add_bos = true;
        return s;
    }
    if (pre == "dbrx" || pre == "smaug-bpe") return make_spec(pre, {kLlama3});
    if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
        auto s = make_spec("qwen2", {kQwen2});
        s.clean_spaces = false;
        return s;
    }
    if (pre == "stablelm2") return make_spec(pre, {kQwen2});
    if (pre == "deepseek-llm") {
        auto s = make_spec(
            pre, {"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kCjk, R"(\p{N}+)"});
        s.clean_spaces = false;
        return s;
    }
    if (pre == "deepseek-v3") {
        auto s = make_spec(pre, {R"(\p{N}{1,3})", kDeepseekV3Cjk, kDeepseekV3Words});
        s.clean_spaces = false;
        return s;
    }
    if (pre == "glm4") {
        auto s = make_spec(pre, {kLlama3});
        s.no_default_bos = true;
        return s;
    }
    if (pre == "gemma4") {
        // SentencePiece-style BPE: no words, only lines and runs of newlines.
        auto s = make_spec(pre, {R"([^\n]+|[\n]+)"});
        s.byte_encode = false;
        s.escape_spaces = true;
        s.whole_newline_runs = true;
        s.force_add_bos = true;
        return s;
    }
    if (pre == "deepseek-coder") {
        auto s = make_spec(pre, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"});
        s.clean_spaces = false;
        return s;
    }
    if (pre == "falcon") {
        return make_spec(pre, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"});
    }
    if (pre == "starcoder" || pre == "refact" || pre == "codeshell" || pre == "exaone" ||
        pre == "minerva-7b") {
        return make_spec(pre, {R"(\p{N})", kGpt2});
    }
    if (pre == "command-r" || pre == "smollm") {
        auto s = make_spec(pre, {R"(\p{N})", kGpt2});
        s.clean_spaces = false;
        return s;
    }
    if (pre == "gpt-2" || pre == "mpt" || pre == "olmo") return make_spec(pre, {kGpt2});
    if (pre == "gpt-4o") {
        auto s = make_spec(pre, {kGpt4oCollapsed});
        s.collapsed = true;
        s.clean_spaces = false;
        return s;
    }
    return {};
}

// Other names llama.cpp gives the same pre-tokenizers.
std::string canonical_pre(const std::string& pre) {
    if (pre.empty()) return "default";
    if (pre == "llama-bpe" || pre == "llama-v3" || pre == "falcon3") return "llama3";
    if (pre == "phi-2") return "gpt-2";
    if (pre == "chatglm-bpe") return "glm4";
    if (pre == "hunyuan-dense" || pre == "joyai-llm") return "deepseek-v3";
    if (pre == "llama4" || pre == "kanana2") return "gpt-4o";
    return pre;
}

}  // namespace

std::string supported_pre_tokenizers() {
    return "default, llama3, llama-bpe, llama-v3, falcon3, dbrx, smaug-bpe, qwen2, "
           "deepseek-r1-qwen, stablelm2, deepseek-llm, deepseek-coder, deepseek-v3, "
           "hunyuan-dense, joyai-llm, falcon, starcoder, refact, codeshell, exaone, minerva-7b, "
           "command-r, smollm, gpt-2, phi-2, mpt, olmo, gpt-4o, llama4, kanana2, glm4, "
           "chatglm-bpe, gemma4";
}

PreTokenizerSpec pre_tokenizer_spec(const std::string& pre) {
    PreTokenizerSpec s = spec_by_canonical(canonical_pre(pre));
    if (s.regexes.empty()) {
        fail("tokenizer.ggml.pre '", pre,
             "' is not supported (supported: ", supported_pre_tokenizers(), ")");
    }
    return s;
}

// ---------------------------------------------------------------------------------------------
// PCRE2 splitter

struct PreTokenizer::Regex {
    pcre2_code* code = nullptr;
    std::string source;
    ~Regex() { pcre2_code_free(code); }
};

namespace {

pcre2_code* compile(const std::string& src, uint32_t opts) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(src.data()), src.size(), opts,
                                     &err, &err_off, nullptr);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        fail("pre-tokenizer regex '", src, "' rejected by PCRE2 at offset ", err_off, ": ",
             reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up; errors are fine
    return code;
}

// The classes of the collapsed text, one capture group each, in the order of kClassBytes.
const char* const kClasses = R"(^(?:(\p{N})|(\p{L})|(\p{P})|(\p{M})|(\p{S})))";
const char kClassBytes[] = {'\xD1', '\xD2', '\xD3', '\xD4', '\xD5'};
constexpr char kOtherByte = '\xD0';

}  // namespace

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes, bool collapsed,
                           bool byte_encode)
    : collapsed_(collapsed), byte_encode_(byte_encode) {
    const uint32_t opts =
        collapsed ? PCRE2_DOLLAR_ENDONLY : PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY;
    auto add = [](const std::string& src, uint32_t o) {
        auto r = std::make_unique<Regex>();
        r->source = src;
        r->code = compile(src, o);
        return r;
    };
    for (const std::string& src : regexes) regexes_.push_back(add(src, opts));
    if (collapsed) classes_ = add(kClasses, PCRE2_UTF | PCRE2_UCP);
}

PreTokenizer::~PreTokenizer() = default;

namespace {

struct Piece {
    size_t begin, end;  // byte offsets into the subject
};

class MatchData {
  public:
    explicit MatchData(const pcre2_code* code)
        : md_(pcre2_match_data_create_from_pattern(code, nullptr)) {
        if (!md_) fail("pre-tokenizer: out of memory for PCRE2 match data");
    }
    ~MatchData() { pcre2_match_data_free(md_); }
    pcre2_match_data* get() const { return md_; }

  private:
    pcre2_match_data* md_;
};

// Finds the first match of `code` in subject[0, len) at or after `start`. Returns false when there
// is none; throws when PCRE2 gives up.
bool find_match(const pcre2_code* code, const char* subject, size_t len, size_t start,
                pcre2_match_data* md, size_t& ms, size_t& me) {
    auto run = [&](uint32_t opts) {
        return pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject), len, start,
                           opts | PCRE2_NO_UTF_CHECK, md, nullptr);
    };
    int rc = run(0);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = run(PCRE2_NO_JIT);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        fail("pre-tokenizer: PCRE2 match failed: ", reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    ms = ov[0];
    me = ov[1];
    return true;
}

// Splits one piece by one regex: matches and the gaps between them all become pieces.
void split_piece(const pcre2_code* code, const std::string& subject, Piece p, pcre2_match_data* md,
                 bool utf, std::vector<Piece>& out) {
    const char* base = subject.data() + p.begin;
    const size_t len = p.end - p.begin;
    size_t start = 0, last = 0, ms = 0, me = 0;
    while (start <= len && find_match(code, base, len, start, md, ms, me)) {
        if (me == ms) {  // empty match: yields no piece; step over one character
            if (ms >= len) break;
            start = ms + (utf ? unicode::utf8_len(static_cast<uint8_t>(base[ms])) : 1);
            continue;
        }
        if (ms > last) out.push_back({p.begin + last, p.begin + ms});
        out.push_back({p.begin + ms, p.begin + me});
        last = start = me;
    }
    if (last < len) out.push_back({p.begin + last, p.end});
}

// The codepoint the regexes see in place of `cp`. llama.cpp's \s is the White_Space property,
// and it turns non-ASCII whitespace into \v before matching; PCRE2's UCP \s also matches U+180E
// (via \h), which White_Space excludes, so it is shown as U+200B, another non-space format
// character.
uint32_t regex_cpt(uint32_t cp) {
    if (unicode::is_non_ascii_space(cp)) return 0x0B;
    if (cp == 0x180E) return 0x200B;
    return cp;
}

}  // namespace

// The byte that stands for a non-ASCII codepoint in the collapsed text.
char PreTokenizer::collapse(uint32_t cp, void* match_data) const {
    if (unicode::is_non_ascii_space(cp)) return '\x0B';
    auto* md = static_cast<pcre2_match_data*>(match_data);
    const std::string utf8 = unicode::encode_utf8(cp);
    const int rc = pcre2_match(classes_->code, reinterpret_cast<PCRE2_SPTR>(utf8.data()),
                               utf8.size(), 0, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 2) return kOtherByte;  // no match (rc < 0) or no group
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    for (int g = 1; g < rc; ++g) {
        if (ov[2 * g] != PCRE2_UNSET) return kClassBytes[g - 1];
    }
    return kOtherByte;
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
    const std::vector<uint32_t> cpts = unicode::decode_utf8(text);

    // The subject the regexes see. Normally the codepoints re-encoded, non-ASCII whitespace as
    // \v; collapsed, one byte per codepoint. cpt_at[b] is the codepoint index of the character
    // starting at subject byte b.
    std::string subject;
    std::vector<uint32_t> cpt_at;
    subject.reserve(text.size());
    cpt_at.reserve(text.size() + 1);
    if (collapsed_) {
        MatchData md(classes_->code);
        for (size_t i = 0; i < cpts.size(); ++i) {
            subject += cpts[i] < 0x80 ? static_cast<char>(cpts[i]) : collapse(cpts[i], md.get());
            cpt_at.push_back(static_cast<uint32_t>(i));
        }
    } else {
        for (size_t i = 0; i < cpts.size(); ++i) {
            const uint32_t cp = regex_cpt(cpts[i]);
            unicode::append_utf8(subject, cp);
            cpt_at.resize(subject.size(), static_cast<uint32_t>(i));
        }
    }
    cpt_at.push_back(static_cast<uint32_t>(cpts.size()));

    std::vector<Piece> pieces;
    if (!subject.empty()) pieces.push_back({0, subject.size()});
    for (const auto& r : regexes_) {
        MatchData md(r->code);
        std::vector<Piece> next;
        next.reserve(pieces.size() * 2);
        for (const Piece& p : pieces) split_piece(r->code, subject, p, md.get(), !collapsed_, next);
        pieces.swap(next);
    }

    // Each piece's original codepoints, byte by byte in the GPT-2 alphabet (or as they are).
    std::vector<std::string> words;
    words.reserve(pieces.size());
    std::string utf8;
    for (const Piece& p : pieces) {
        std::string w;
        for (uint32_t i = cpt_at[p.begin]; i < cpt_at[p.end]; ++i) {
            if (!byte_encode_) {
                unicode::append_utf8(w, cpts[i]);
                continue;
            }
            utf8.clear();
            unicode::append_utf8(utf8, cpts[i]);
            for (unsigned char b : utf8) unicode::append_utf8(w, unicode::byte_to_cpt(b));
        }
        words.push_back(std::move(w));
    }
    return words;
}

}  // namespace specula
