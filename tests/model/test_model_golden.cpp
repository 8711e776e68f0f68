// The llama2.c golden run: stories260K (GGUF v3 and the original v1 file) generates 256 greedy
// tokens from BOS alone; the ids must equal llama.cpp's reference and the decoded text must equal
// the story published in llama2.c's doc/stories260K.md (shipped as
// shared/models/tinystories/stories260K.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/session.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::token_id;

constexpr int kSteps = 256;

// The code block that follows the `./run ... -t 0.0` command line in the markdown, without the
// command line itself and without the final newline.
std::string golden_text_from_markdown(const std::string& md) {
    std::istringstream in(md);
    std::string line, text;
    bool inside = false, found = false;
    while (std::getline(in, line)) {
        if (!inside) {
            if (line.rfind("$ ./run ", 0) == 0 && line.find("-t 0.0") != std::string::npos) {
                inside = found = true;
            }
            continue;
        }
        if (line.rfind("```", 0) == 0) break;
        text += line + "\n";
    }
    EXPECT_TRUE(found) << "no greedy (-t 0.0) run found in stories260K.md";
    if (!text.empty()) text.pop_back();
    return text;
}

std::vector<token_id> greedy_from_bos(const specula::Model& m, int steps) {
    specula::SessionParams sp;
    sp.n_ctx = 512;
    sp.n_threads = 2;
    specula::Session s(m, sp);
    const int n_vocab = m.hparams().n_vocab;
    std::vector<token_id> out;
    token_id t = m.tokenizer().bos();
    for (int i = 0; i < steps; ++i) {
        s.eval(std::span<const token_id>(&t, 1));
        const float* l = s.logits(0);
        token_id best = 0;
        for (token_id v = 1; v < n_vocab; ++v) {
            if (l[v] > l[best]) best = v;
        }
        out.push_back(best);
        t = best;
    }
    return out;
}

std::string decode_like_llama2c(const specula::Tokenizer& tok, const std::vector<token_id>& ids) {
    std::string text;
    for (size_t i = 0; i < ids.size(); ++i) {
        std::string piece = tok.token_to_piece(ids[i]);
        if (i == 0 && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
        text += piece;
    }
    return text;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, Stories260KFromBos) {
    const auto model = specula::Model::load(specula::test::shared_path(GetParam()));
    const json ref = json::parse(
        specula::test::read_file(specula::test::shared_path("reference/stories260K.json")));
    std::vector<token_id> ref_ids;
    for (const auto& p : ref["prompts"]) {
        if (p["name"] == "bos_only")
            ref_ids = p["greedy"]["token_ids"].get<std::vector<token_id>>();
    }
    ASSERT_EQ(static_cast<int>(ref_ids.size()), kSteps);

    const auto ids = greedy_from_bos(*model, kSteps);
    EXPECT_EQ(ids, ref_ids);

    const std::string golden = golden_text_from_markdown(
        specula::test::read_file(specula::test::shared_path("models/tinystories/stories260K.md")));
    ASSERT_GT(golden.size(), 500u);
    EXPECT_EQ(decode_like_llama2c(model->tokenizer(), ids), golden);
}

INSTANTIATE_TEST_SUITE_P(Files, Golden,
                         ::testing::Values("models/tinystories/stories260K.gguf",
                                           "models/tinystories/stories260K-ggufv1.gguf"),
                         [](const auto& info) {
                             return info.param.find("v1") != std::string::npos ? "v1" : "v3";
                         });

}  // namespace
