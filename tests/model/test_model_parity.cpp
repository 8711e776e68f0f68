// Parity with llama.cpp (c392e509): for every model that has a reference JSON in
// shared/reference, tokenise each prompt, evaluate it in one batch and compare the logits at
// every position with the reference top-10; then teacher-force the reference greedy tokens one
// per eval and compare each step. Tolerances follow shared/reference/README.md section 1, by the
// file's weight type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/session.h"
#include "parity_util.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::token_id;
using specula::test::argmax;
using specula::test::compare_row;
using specula::test::Stats;

constexpr int kExpectedModels = 27;

struct RefFile {
    std::string stem;
    std::string json_path;
};

// Every llama-ref-dump JSON whose model file exists.
std::vector<RefFile> reference_files() {
    std::vector<RefFile> out;
    const std::string dir = specula::test::shared_dir() + "/reference";
    if (!std::filesystem::is_directory(dir)) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().extension() != ".json") continue;
        const json j = json::parse(specula::test::read_file(e.path().string()));
        if (!j.is_object() || j.value("format", "") != "llama-ref-dump/1") continue;
        const std::string model =
            specula::test::shared_dir() + "/" + j["model"]["path"].get<std::string>();
        if (!std::filesystem::exists(model)) continue;
        out.push_back({e.path().stem().string(), e.path().string()});
    }
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.stem < b.stem; });
    return out;
}

// Suggested parity tolerance of reference/README.md section 1, by weight type.
struct Tolerance {
    double prompt;
    double greedy_long;  // for the 256-step bos_only generations
};

Tolerance tolerance_for(const std::string& stem, const json& model) {
    // The two d64 real-vocabulary files have their own rows in the README's table.
    if (stem.find("gpt2vocab") != std::string::npos) return {0.04, 0.04};
    if (stem.find("llama3vocab") != std::string::npos) return {1.0, 1.0};
    const std::string ft = model["general.file_type"].is_string()
                               ? model["general.file_type"].get<std::string>()
                               : std::string("0");
    if (ft == "0") return {1e-4, 3e-4};  // F32
    if (ft == "1") return {0.03, 0.03};  // F16
    if (ft == "32") return {0.1, 0.1};   // BF16
    return {0.5, 0.5};                   // quantised
}

// The 5 ladder files also ship all n_vocab logits of one prompt position: compare every one.
void check_full_logits(const json& ref, const specula::Model& model, double tol) {
    if (!ref.contains("full_logits")) return;
    for (const auto& fl : ref["full_logits"]) {
        const std::string bin = specula::test::read_file(
            specula::test::shared_path("reference/" + fl["file"].get<std::string>()));
        const int n_vocab = fl["n_vocab"].get<int>(), pos = fl["position"].get<int>();
        ASSERT_EQ(n_vocab, model.hparams().n_vocab);
        ASSERT_EQ(bin.size(), sizeof(float) * n_vocab) << fl["file"];
        std::vector<float> expect(n_vocab);
        std::memcpy(expect.data(), bin.data(), bin.size());
        std::vector<token_id> ids;
        for (const auto& p : ref["prompts"]) {
            if (p["name"] == fl["prompt"]) ids = p["token_ids"].get<std::vector<token_id>>();
        }
        ASSERT_GT(static_cast<int>(ids.size()), pos);
        ASSERT_EQ(ids[pos], fl["token_id_at_position"].get<token_id>());
        specula::SessionParams sp;
        sp.n_ctx = 512;
        sp.n_threads = 1;
        specula::Session s(model, sp);
        s.eval(std::span<const token_id>(ids.data(), pos + 1), false);
        double max_diff = 0;
        for (int v = 0; v < n_vocab; ++v) {
            max_diff = std::max(max_diff, std::fabs(double(s.logits(0)[v]) - expect[v]));
        }
        EXPECT_LE(max_diff, tol) << fl["file"] << ": max |diff| over all " << n_vocab << " logits";
        EXPECT_EQ(argmax(s.logits(0), n_vocab), fl["argmax"].get<int>()) << fl["file"];
        std::printf("[parity] %s: all %d logits within %.3g\n",
                    fl["file"].get<std::string>().c_str(), n_vocab, max_diff);
    }
}

class ModelParity : public ::testing::TestWithParam<RefFile> {};

TEST_P(ModelParity, MatchesLlamaCpp) {
    const RefFile& rf = GetParam();
    const json ref = json::parse(specula::test::read_file(rf.json_path));
    const json& jm = ref["model"];
    const auto model =
        specula::Model::load(specula::test::shared_path(jm["path"].get<std::string>()));
    const auto& hp = model->hparams();
    const auto& tok = model->tokenizer();
    specula::test::expect_model_shape(*model, jm);

    const Tolerance tol = tolerance_for(rf.stem, jm);
    specula::SessionParams sp;
    sp.n_ctx = ref["eval"]["n_ctx"].get<int>();
    // One thread: results do not depend on the thread count (test_model_session checks that
    // bit for bit), and a single thread keeps this long test quick on a loaded machine.
    sp.n_threads = 1;
    specula::Session session(*model, sp);
    Stats prompt_st, greedy_st;

    for (const auto& p : ref["prompts"]) {
        const std::string name = p["name"].get<std::string>();
        const auto ref_ids = p["token_ids"].get<std::vector<token_id>>();
        if (name == "bos_only") {
            ASSERT_EQ(ref_ids, std::vector<token_id>{tok.bos()}) << rf.stem << " " << name;
        } else {
            const auto ids = tok.encode(p["text"].get<std::string>(), true, false);
            ASSERT_EQ(ids, ref_ids) << rf.stem << " prompt '" << name << "': token ids differ";
        }
        session.reset();
        session.eval(ref_ids);
        ASSERT_EQ(session.n_logits(), static_cast<int>(ref_ids.size()));
        const auto& ptop = p["prompt_top"];
        ASSERT_EQ(ptop.size(), ref_ids.size());
        for (size_t i = 0; i < ref_ids.size(); ++i) {
            compare_row(session.logits(static_cast<int>(i)), hp.n_vocab, ptop[i], tol.prompt,
                        rf.stem + " prompt '" + name + "' position " + std::to_string(i),
                        prompt_st);
        }
        const auto& greedy = p["greedy"];
        const auto gids = greedy["token_ids"].get<std::vector<token_id>>();
        const double gtol = gids.size() > 64 ? tol.greedy_long : tol.prompt;
        for (size_t i = 0; i < gids.size(); ++i) {
            const token_id t = gids[i];
            session.eval(std::span<const token_id>(&t, 1));
            const auto& step = greedy["steps"][i];
            ASSERT_EQ(step["input_token"].get<token_id>(), t);
            compare_row(session.logits(0), hp.n_vocab, step["top"], gtol,
                        rf.stem + " prompt '" + name + "' greedy step " + std::to_string(i) +
                            " (pos " + std::to_string(step["pos"].get<int>()) + ")",
                        greedy_st);
        }
    }
    check_full_logits(ref, *model, tol.prompt);
    EXPECT_EQ(prompt_st.n_failures + greedy_st.n_failures, 0) << rf.stem << ": mismatches";
    std::printf(
        "[parity] %-45s tol %-7g prompt rows %4d max|d| %.3g | greedy rows %4d max|d| %.3g"
        " | argmax checks %d\n",
        rf.stem.c_str(), tol.prompt, prompt_st.n_rows, prompt_st.max_diff, greedy_st.n_rows,
        greedy_st.max_diff, prompt_st.n_argmax_checked + greedy_st.n_argmax_checked);
}

INSTANTIATE_TEST_SUITE_P(AllReferences, ModelParity, ::testing::ValuesIn(reference_files()),
                         [](const ::testing::TestParamInfo<RefFile>& info) {
                             std::string s = info.param.stem;
                             for (char& c : s) {
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             }
                             return s;
                         });

// The data set ships 27 models with references: all must be found (none silently skipped).
TEST(ModelParityData, AllReferencesPresent) {
    EXPECT_EQ(static_cast<int>(reference_files().size()), kExpectedModels)
        << "reference JSONs with an existing model under " << specula::test::shared_dir();
}

}  // namespace
