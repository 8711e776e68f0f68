// What the grammar tests share (test_sampling_*): a text run through a GrammarState, and real
// vocabularies (a GGUF's tokenizer with its GrammarVocab), loaded once per test binary.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "sampling/grammar_state.h"
#include "sampling/grammar_vocab.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace specula::test {

// -1: the whole text is a complete value; otherwise the index of the first refused byte, or
// 1000 + size when accepted but incomplete.
inline int grammar_run(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
    GrammarState st(g);
    for (size_t i = 0; i < text.size(); ++i)
        if (!st.step(uint8_t(text[i]))) return int(i);
    return st.can_end() ? -1 : 1000 + int(text.size());
}

struct GrammarTestVocab {
    std::unique_ptr<Tokenizer> tok;
    std::shared_ptr<const GrammarVocab> gv;
    int32_t byte_token[256];  // the text token whose piece is that one byte, or -1
};

// The vocabulary of ../shared's file `rel` (cached).
inline const GrammarTestVocab& grammar_vocab(const std::string& rel) {
    static std::map<std::string, std::unique_ptr<GrammarTestVocab>> cache;
    auto& slot = cache[rel];
    if (!slot) {
        slot = std::make_unique<GrammarTestVocab>();
        auto f = GGUFFile::open(shared_path(rel));
        slot->tok = Tokenizer::from_gguf(*f);
        slot->gv = GrammarVocab::from_tokenizer(*slot->tok);
        std::fill(std::begin(slot->byte_token), std::end(slot->byte_token), -1);
        for (int32_t id = 0; id < slot->gv->n_vocab(); ++id) {
            const std::string_view p = slot->gv->piece(id);
            if (slot->gv->kind(id) == GrammarVocab::kText && p.size() == 1)
                slot->byte_token[uint8_t(p[0])] = id;
        }
    }
    return *slot;
}

}  // namespace specula::test
