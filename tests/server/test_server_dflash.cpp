// DFlash block drafters through the commands (tests/data/dflash's random-weight drafter for its
// qwen3 target): `specula run --spec-type dflash -md DRAFT` (and vLLM's --speculative-config
// {"method": "dflash", "model": DRAFT}) prints what plain greedy decoding prints, and `specula
// serve` with the drafter on two slots answers two requests at once with a plain server's texts; a
// drafter for another target is refused naming the key and both files; the flags' checks.
#include <gtest/gtest.h>

#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_process.h"
#include "common/error.h"
#include "model/memory_plan.h"
#include "server/server_process.h"
#include "speculative/config.h"
#include "speculative/drafter_memory.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::ServerProcess;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/dflash/";
const std::string kTarget = kDir + "rand-qwen3-tok512-d128-l4-F16.gguf";
const std::string kDraft = kDir + "rand-dflash-qwen3-tok512-d128-l2-b8-F16.gguf";
const char* kPrompts[] = {"Once upon a time there was", "The little dog ran to the"};
constexpr int kTokens = 32;

std::string run_greedy(const std::string& prompt, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {
        "run",    "-m", kTarget,        "-p", prompt, "-n", std::to_string(kTokens),
        "--temp", "0",  "--ignore-eos", "-t", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = specula::test::run_specula(args);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out;
}

std::string complete(const ServerProcess& s, const std::string& prompt) {
    const json body = {
        {"prompt", prompt}, {"max_tokens", kTokens}, {"temperature", 0}, {"ignore_eos", true}};
    auto res = s.client().Post("/v1/completions", body.dump(), "application/json");
    if (!res) return "(no response)";
    EXPECT_EQ(res->status, 200) << res->body;
    const json j = json::parse(res->body, nullptr, false);
    return j.is_object() && j.contains("choices") ? j["choices"][0]["text"].get<std::string>()
                                                  : res->body;
}

}  // namespace

TEST(ServerDFlash, GreedyEqualsPlainInRunAndServe) {
    std::vector<std::string> expected;
    for (const char* p : kPrompts) expected.push_back(run_greedy(p));
    ASSERT_FALSE(expected[0].empty());
    for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(run_greedy(kPrompts[i], {"--spec-type", "dflash", "-md", kDraft, "--draft", "5"}),
                  expected[i]);
    }
    // vLLM's spelling, once.
    EXPECT_EQ(run_greedy(kPrompts[0],
                         {"--speculative-config", R"({"method": "dflash", "model": ")" + kDraft +
                                                      R"(", "num_speculative_tokens": 12})"}),
              expected[0]);
    // The server's texts (invalid UTF-8 of the random model's byte tokens replaced in its JSON)
    // from a plain server, then from one drafting on two slots at once.
    std::vector<std::string> served;
    {
        ServerProcess plain({"-m", kTarget, "-c", "512", "-t", "1"}, "dflash-plain");
        for (const char* p : kPrompts) served.push_back(complete(plain, p));
    }
    ServerProcess s({"-m", kTarget, "-np", "2", "-c", "512", "-t", "2", "--spec-type", "dflash",
                     "-md", kDraft, "--draft", "7"},
                    "dflash");
    std::vector<std::future<std::string>> replies;
    for (const char* p : kPrompts)
        replies.push_back(std::async(std::launch::async, [&s, p] { return complete(s, p); }));
    for (size_t i = 0; i < replies.size(); ++i)
        EXPECT_EQ(replies[i].get(), served[i]) << kPrompts[i];
}

// The drafter is 128 wide: on a 256-wide qwen3 it is refused, naming the key and both files,
// before anything runs.
TEST(ServerDFlash, DrafterForAnotherTargetIsRefused) {
    const std::string target =
        std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/rand-qwen3-tok512-d256-l2-F16.gguf";
    const auto r = specula::test::run_specula(
        {"run", "-m", target, "-p", "Hi", "-n", "4", "--spec-type", "dflash", "-md", kDraft});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("dflash-draft.embedding_length"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(kDraft), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(target), std::string::npos) << r.err;
}

// --spec-type dflash needs the drafter (-md); vLLM's method "dflash".
TEST(ServerDFlash, FlagsNameTheDrafter) {
    using namespace specula;
    SpeculativeFlags fl;
    fl.spec_type = "dflash";
    EXPECT_THROW(parse_speculative_flags(fl), Error);
    fl.model_draft = kDraft;
    EXPECT_EQ(parse_speculative_flags(fl).method, SpecMethod::dflash);
    EXPECT_STREQ(method_name(SpecMethod::dflash), "dflash");
    fl = SpeculativeFlags{};
    fl.speculative_config = R"({"method": "dflash", "model": ")" + kDraft + "\"}";
    const SpeculativeConfig c = parse_speculative_flags(fl);
    EXPECT_EQ(c.method, SpecMethod::dflash);
    EXPECT_EQ(c.draft_model, kDraft);
}

// The drafter's weights and its per-sequence cache (every layer, the context plus one block) are
// memory plan parts.
TEST(ServerDFlash, DrafterWeightsAndKvArePlanParts) {
    using namespace specula;
    const auto target = Model::load(kTarget);
    SpeculativeFlags fl;
    fl.spec_type = "dflash";
    fl.model_draft = kDraft;
    const SpeculativeSetup setup = load_speculative(parse_speculative_flags(fl), *target);
    ASSERT_TRUE(setup.dflash);
    const DFlashHead& h = *setup.dflash;
    const auto parts = drafter_memory(setup, 256, KVType::F16, KVType::F16);
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].label, "DFlash drafter");
    EXPECT_FALSE(parts[0].per_seq);
    double tensors = 0;
    for (const GGUFTensor& t : h.file->tensors()) tensors += double(t.nbytes);
    EXPECT_GE(parts[0].bytes, tensors);
    EXPECT_EQ(parts[1].label, "DFlash drafter KV");
    EXPECT_TRUE(parts[1].per_seq);
    // 2 layers x (256 + a block of 8) positions x K and V of 64 F16 values (rows allocated in
    // blocks of up to 16).
    const double row = 2.0 * 2 * 64 * 2;
    EXPECT_GE(parts[1].bytes, (256 + 8) * row);
    EXPECT_LE(parts[1].bytes, (256 + 8 + 16) * row);
    EXPECT_GT(drafter_memory(setup, 512, KVType::F16, KVType::F16)[1].bytes, (512 + 8) * row);
}
