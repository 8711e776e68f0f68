// VocabTokenizer::load: the tokenizer.* keys of a GGUF turned into a vocabulary the way llama.cpp
// loads it: token list and types, per-model defaults, special ids from keys, add_bos/add_eos,
// special tokens recognised by their text (EOT, EOM, FIM, end-of-generation; such tokens are
// forced to CONTROL), the special-token list used to split text, and the piece cache.
#include <algorithm>
#include <cctype>
#include <limits>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer_impl.h"

namespace specula {

namespace {

TokenAttr attr_from_type(int32_t type) {
    switch (type) {
        case 1:
            return TokenAttr::NORMAL;
        case 2:
            return TokenAttr::UNKNOWN;
        case 3:
            return TokenAttr::CONTROL;
        case 4:
            return TokenAttr::USER_DEFINED;
        case 5:
            return TokenAttr::UNUSED;
        case 6:
            return TokenAttr::BYTE;
        default:
            return TokenAttr::UNDEFINED;
    }
}

// Token texts llama.cpp recognises when the GGUF does not name the token ("｜" and "▁" in the
// DeepSeek ones are U+FF5C and U+2581).
using Texts = std::initializer_list<const char*>;
const Texts kEotTexts = {"<|eot_id|>",           "<|im_end|>",    "<|end|>",
                         "<end_of_turn>",        "<|endoftext|>", "<EOT>",
                         "<｜end▁of▁sentence｜>"};
// End-of-generation texts as ik_llama.cpp lists them (o200k_harmony: <|return|>, <|call|>).
const Texts kEogTexts = {"<|eot_id|>",
                         "<|im_end|>",
                         "<|end|>",
                         "<|return|>",
                         "<|call|>",
                         "<|flush|>",
                         "<|calls|>",
                         "<end_of_turn>",
                         "<|endoftext|>",
                         "</s>",
                         "<|eom_id|>",
                         "<EOT>",
                         "_<EOT>",
                         "[EOT]",
                         "[EOS]",
                         "<|end_of_text|>",
                         "<end_of_utterance>",
                         "<eos>",
                         "<turn|>",
                         "<|tool_response>",
                         "<｜end▁of▁sentence｜>"};
// gpt-oss's message framing tokens, which llama.cpp always renders and matches (USER_DEFINED).
const Texts kHarmonyFraming = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
const Texts kFimPreTexts = {"<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>"};
const Texts kFimSufTexts = {"<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>"};
const Texts kFimMidTexts = {"<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>"};
const Texts kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<PAD>"};
const Texts kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"};
const Texts kFimSepTexts = {"<|file_sep|>"};

}  // namespace

void VocabTokenizer::read_tokens(const GGUFFile& f) {
    std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (tokens.empty()) fail(f.path(), ": tokenizer.ggml.tokens is missing or empty");
    if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        fail(f.path(), ": tokenizer.ggml.tokens has ", tokens.size(), " entries (max 2^31-1)");
    }
    const size_t n = tokens.size();
    scores_ = f.get_float_array("tokenizer.ggml.scores");
    if (!scores_.empty() && scores_.size() != n) {
        fail(f.path(), ": tokenizer.ggml.scores has ", scores_.size(), " entries, expected ", n);
    }
    const std::vector<int32_t> types = f.get_int_array("tokenizer.ggml.token_type");
    if (!types.empty() && types.size() != n) {
        fail(f.path(), ": tokenizer.ggml.token_type has ", types.size(), " entries, expected ", n);
    }
    texts_ = std::move(tokens);
    attrs_.assign(n, TokenAttr::NORMAL);
    for (size_t i = 0; i < n; ++i) {
        if (texts_[i].empty()) texts_[i] = "[EMPTY_" + std::to_string(i) + "]";
        if (!types.empty()) attrs_[i] = attr_from_type(types[i]);
    }
    token_index_.build(texts_, StringIndex::Duplicates::kKeepLast);
}

void VocabTokenizer::read_special_ids(const GGUFFile& f) {
    // A default the vocabulary is too small for means "none".
    for (token_id* id : {&bos_, &eos_, &eot_, &unk_, &pad_}) {
        if (*id >= n_vocab()) *id = -1;
    }
    token_id eom = -1;
    const std::pair<const char*, token_id*> keys[] = {
        {"tokenizer.ggml.bos_token_id", &bos_},
        {"tokenizer.ggml.eos_token_id", &eos_},
        {"tokenizer.ggml.eot_token_id", &eot_},
        {"tokenizer.ggml.eom_token_id", &eom},
        {"tokenizer.ggml.unknown_token_id", &unk_},
        {"tokenizer.ggml.padding_token_id", &pad_},
        {"tokenizer.ggml.fim_pre_token_id", &fim_.pre},
        {"tokenizer.ggml.fim_suf_token_id", &fim_.suf},
        {"tokenizer.ggml.fim_mid_token_id", &fim_.mid},
        {"tokenizer.ggml.fim_pad_token_id", &fim_.pad},
        {"tokenizer.ggml.fim_rep_token_id", &fim_.rep},
        {"tokenizer.ggml.fim_sep_token_id", &fim_.sep},
        {"tokenizer.ggml.prefix_token_id", &fim_.pre},  // older names of the FIM keys
        {"tokenizer.ggml.suffix_token_id", &fim_.suf},
        {"tokenizer.ggml.middle_token_id", &fim_.mid},
    };
    for (const auto& [key, id] : keys) {
        const int64_t v = f.get_int_or(key, -1);
        // Like llama.cpp, an id outside the vocabulary keeps the default.
        if (v >= 0 && v < n_vocab()) *id = static_cast<token_id>(v);
    }
    eom_ = eom;
    add_bos_ = force_add_bos_ || f.get_bool_or("tokenizer.ggml.add_bos_token", add_bos_);
    add_eos_ = f.get_bool_or("tokenizer.ggml.add_eos_token", add_eos_);
}

// Ids still unknown are filled from the first (lowest-id) token with a known text, and such
// tokens are forced to CONTROL. A repeated text stands for its last id, as in llama.cpp's map.
void VocabTokenizer::detect_special_tokens() {
    auto lowest = [&](Texts texts) {
        token_id best = -1;
        for (const char* t : texts) {
            const token_id id = find_token(t);
            if (id >= 0 && (best < 0 || id < best)) best = id;
        }
        return best;
    };
    auto claim = [&](token_id& slot, Texts texts) {
        if (slot >= 0) return;
        slot = lowest(texts);
        if (slot >= 0) attrs_[slot] = TokenAttr::CONTROL;
    };
    claim(eot_, kEotTexts);
    claim(eom_, {"<|eom_id|>"});
    claim(fim_.pre, kFimPreTexts);
    claim(fim_.suf, kFimSufTexts);
    claim(fim_.mid, kFimMidTexts);
    claim(fim_.pad, kFimPadTexts);
    claim(fim_.rep, kFimRepTexts);
    claim(fim_.sep, kFimSepTexts);

    std::vector<token_id> eog;
    for (const char* t : kEogTexts) {
        const token_id id = find_token(t);
        if (id < 0) continue;
        eog.push_back(id);
        attrs_[id] = TokenAttr::CONTROL;
    }
    for (const char* t : kHarmonyFraming) {
        if (const token_id id = find_token(t); id >= 0) attrs_[id] = TokenAttr::USER_DEFINED;
    }
    for (token_id id : {fim_.pad, fim_.rep, fim_.sep, eos_, eot_, eom_}) {
        if (id >= 0) eog.push_back(id);
    }
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
    // o200k_harmony (and solar-open): <|end|> ends a message, not the generation, when the
    // vocabulary ends turns with <|return|> and <|call|> (or <|calls|> and <|flush|>).
    auto eog_has = [&](const char* t) {
        const token_id id = find_token(t);
        return id >= 0 && std::binary_search(eog.begin(), eog.end(), id) ? id : -1;
    };
    const token_id end = eog_has("<|end|>");
    const bool calls = eog_has("<|call|>") >= 0 || eog_has("<|calls|>") >= 0;
    if (end >= 0 && calls && (eog_has("<|return|>") >= 0 || eog_has("<|flush|>") >= 0)) {
        eog.erase(std::find(eog.begin(), eog.end(), end));
        attrs_[end] = TokenAttr::USER_DEFINED;
    }
    // Gemma 4 and PaddleOCR: </s> is not an end when <|tool_response> is one.
    if (const token_id s = eog_has("</s>"); s >= 0 && eog_has("<|tool_response>") >= 0) {
        eog.erase(std::find(eog.begin(), eog.end(), s));
        attrs_[s] = TokenAttr::NORMAL;
    }
    eog_ = std::move(eog);
}

void VocabTokenizer::build_caches(const GGUFFile& f) {
    const token_id n = n_vocab();
    special_tokens_.clear();
    for (token_id id = 0; id < n; ++id) {
        const TokenAttr a = attrs_[id];
        if (a == TokenAttr::CONTROL || a == TokenAttr::USER_DEFINED || a == TokenAttr::UNKNOWN) {
            special_tokens_.push_back(id);
        }
    }
    std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                     [&](token_id a, token_id b) { return texts_[a].size() > texts_[b].size(); });

    pieces_.resize(n);
    for (token_id id = 0; id < n; ++id) pieces_[id] = make_piece(id);

    // Phi-3: special tokens swallow the whitespace after them, except <unk>, <s>, <|endoftext|>.
    strip_.assign(n, 0);
    std::string name = f.get_string_or("general.name", "");
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
        for (token_id id : special_tokens_) strip_[id] |= kRstrip;
        if (token_id id = find_token("</s>"); id >= 0) strip_[id] |= kRstrip;
        for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) {
            if (token_id id = find_token(t); id >= 0) strip_[id] &= ~kRstrip;
        }
    }
}

void VocabTokenizer::load(const GGUFFile& f) {
    read_tokens(f);
    configure(f);
    add_space_prefix_ = f.get_bool_or("tokenizer.ggml.add_space_prefix", add_space_prefix_);
    read_special_ids(f);
    detect_special_tokens();
    build_caches(f);
    nl_ = find_newline();
}

}  // namespace specula
