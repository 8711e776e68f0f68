// min_prompt_tokens (tokenizer/prompt.h) is a true lower bound: for every shared vocabulary
// (SentencePiece and byte-level BPE) and each of llama.cpp's test texts, and for texts made of
// the vocabulary's longest tokens, spaces, newlines and bytes with no token of their own, the
// real tokenization is never shorter than ceil(bytes / the longest token text).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/prompt.h"
#include "tokenizer/tokenizer.h"

namespace specula {
namespace {

std::vector<std::string> test_texts(const std::string& vocab_path, const Tokenizer& tok) {
    std::vector<std::string> texts;
    const std::string inp = vocab_path + ".inp";
    if (std::filesystem::exists(inp)) {
        const std::string all = test::read_file(inp);
        const std::string sep = "\n__ggml_vocab_test__\n";
        for (size_t p = 0;;) {
            const size_t e = all.find(sep, p);
            texts.push_back(all.substr(p, e == std::string::npos ? std::string::npos : e - p));
            if (e == std::string::npos) break;
            p = e + sep.size();
        }
    }
    // The longest token texts, repeated, as written in a prompt (piece bytes).
    token_id longest = 0;
    for (token_id id = 0; id < tok.n_vocab(); ++id)
        if (tok.token_text(id).size() > tok.token_text(longest).size()) longest = id;
    texts.push_back(std::string(5000, ' '));
    texts.push_back(std::string(5000, '\n'));
    texts.push_back(std::string(3000, '\xff'));
    std::string rep;
    for (int i = 0; i < 50; ++i) rep += tok.token_text(longest);
    texts.push_back(rep);
    std::string pieces;
    for (int i = 0; i < 50; ++i) pieces += tok.token_to_piece(longest);
    texts.push_back(pieces);
    return texts;
}

TEST(PromptBytes, MinPromptTokensNeverExceedsTheRealCount) {
    int n_vocabs = 0;
    for (const auto& e : std::filesystem::directory_iterator(test::shared_path("vocab"))) {
        if (e.path().extension() != ".gguf") continue;
        const std::string path = e.path().string();
        const auto file = GGUFFile::open(path);
        const auto tok = Tokenizer::from_gguf(*file);
        ++n_vocabs;
        EXPECT_GE(longest_token_bytes(*tok), 1u);
        for (const std::string& text : test_texts(path, *tok)) {
            const size_t n_real = tokenize_prompt(*tok, text).size();
            EXPECT_LE(min_prompt_tokens(*tok, text.size()), int64_t(n_real))
                << path << ": " << text.size() << " bytes, longest token "
                << longest_token_bytes(*tok);
        }
    }
    EXPECT_GE(n_vocabs, 10);
}

TEST(PromptBytes, CheckPromptBytesRefusesOnlyWhatCannotFit) {
    const auto file = GGUFFile::open(test::shared_path("models/tinystories/stories260K.gguf"));
    const auto tok = Tokenizer::from_gguf(*file);
    const size_t longest = longest_token_bytes(*tok);
    EXPECT_EQ(min_prompt_tokens(*tok, 0), 0);
    EXPECT_EQ(min_prompt_tokens(*tok, 1), 1);
    EXPECT_EQ(min_prompt_tokens(*tok, longest * 100), 100);
    EXPECT_EQ(min_prompt_tokens(*tok, longest * 100 + 1), 101);
    EXPECT_EQ(check_prompt_bytes(*tok, longest * 256, 256, "").what, ContextFit::fits);
    const ContextFit f = check_prompt_bytes(*tok, longest * 256 + 1, 256, " (-c)");
    EXPECT_EQ(f.what, ContextFit::prompt_too_long);
    EXPECT_NE(f.message.find("so at least 257 tokens"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("the context (-c) holds 256"), std::string::npos) << f.message;
}

}  // namespace
}  // namespace specula
