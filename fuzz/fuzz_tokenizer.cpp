// Fuzzes the tokenizers over every vocabulary in ../shared/vocab (SentencePiece and byte-level
// BPE): byte 0 picks the vocabulary, byte 1 the flags (add_special, parse_special), the rest is
// the text. Encoding must never crash, and every id it returns must be in the vocabulary and
// decode to a piece.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Vocab {
    std::unique_ptr<specula::GGUFFile> file;
    std::unique_ptr<specula::Tokenizer> tok;
};

std::vector<Vocab>& vocabs() {
    static std::vector<Vocab> v = [] {
        const std::string dir =
            specula::env_value("SPECULA_SHARED_DIR").value_or(SPECULA_SHARED_DIR_DEFAULT) +
            "/vocab";
        std::vector<std::string> paths;
        for (const auto& e : std::filesystem::directory_iterator(dir))
            if (e.path().extension() == ".gguf") paths.push_back(e.path().string());
        std::sort(paths.begin(), paths.end());
        std::vector<Vocab> out;
        for (const auto& p : paths) {
            Vocab x;
            x.file = specula::GGUFFile::open(p);
            x.tok = specula::Tokenizer::from_gguf(*x.file);
            out.push_back(std::move(x));
        }
        if (out.empty()) std::abort();  // the shared vocabularies are missing
        return out;
    }();
    return v;
}

}  // namespace

// Loads the vocabularies before fuzzing starts: it takes seconds under ASan (llama3's 128k
// tokens and merges), which would otherwise count against the first input's -timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    (void)vocabs();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto& vs = vocabs();
    if (size < 2) return 0;
    const Vocab& v = vs[data[0] % vs.size()];
    const bool add_special = data[1] & 1, parse_special = data[1] & 2;
    const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
    try {
        const auto ids = v.tok->encode(text, add_special, parse_special);
        for (auto id : ids) {
            if (id < 0 || id >= v.tok->n_vocab()) std::abort();
            (void)v.tok->token_to_piece(id, data[1] & 4);
        }
    } catch (const specula::Error&) {
    }
    return 0;
}
