// The architectures of 2026 through `specula serve`, batched: qwen35 / qwen35moe (hybrid layers,
// whose recurrent state rolls back exactly; with an MTP head, built in or from a sidecar, that head
// drafting too), gemma3 (sliding-window ring caches), gemma4, deepseek2 and glm4moe (with their
// nextn heads) and nemotron_h (Mamba-2 state), plainly, with a draft model and with n-gram
// drafting, two requests at once on two slots: each reply's greedy text equals `specula run --temp
// 0` on the same prompt (as JSON carries it: bytes that are not UTF-8, which random weights
// produce, replaced as the server replaces them).
#include <gtest/gtest.h>

#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_process.h"
#include "server/server_process.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::ServerProcess;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const char* kPrompts[] = {"Once upon a time there was", "The little dog ran to the"};
constexpr int kTokens = 40;

std::string run_greedy(const std::string& model, const std::string& prompt) {
    const auto r =
        specula::test::run_specula({"run", "-m", model, "-p", prompt, "-n", std::to_string(kTokens),
                                    "--temp", "0", "--ignore-eos", "-t", "1"});
    EXPECT_EQ(r.status, 0) << r.err;
    const std::string as_json = json(r.out).dump(-1, ' ', false, json::error_handler_t::replace);
    return json::parse(as_json).get<std::string>();
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

void expect_served_equals_run(const std::string& model, const std::string& draft, bool mtp = false,
                              const std::string& mtp_sidecar = "") {
    std::vector<std::string> expected;
    for (const char* p : kPrompts) expected.push_back(run_greedy(model, p));
    ASSERT_FALSE(expected[0].empty());
    std::vector<std::vector<std::string>> modes = {
        {}, {"-md", draft, "--draft", "4"}, {"--spec-type", "ngram", "--draft", "3"}};
    if (mtp) modes.push_back({"--spec-type", "mtp", "--draft", "2"});
    if (!mtp_sidecar.empty())
        modes.push_back({"--spec-type", "mtp", "-md", mtp_sidecar, "--draft", "3"});
    for (const auto& mode : modes) {
        std::vector<std::string> args = {"-m", model, "-np", "2", "-c", "512", "-t", "2"};
        args.insert(args.end(), mode.begin(), mode.end());
        ServerProcess s(args, "arch");
        std::vector<std::future<std::string>> replies;
        for (const char* p : kPrompts)
            replies.push_back(std::async(std::launch::async, [&s, p] { return complete(s, p); }));
        for (size_t i = 0; i < replies.size(); ++i)
            EXPECT_EQ(replies[i].get(), expected[i])
                << model << " " << (mode.empty() ? "plain" : mode[0] + " " + mode[1]) << ": "
                << kPrompts[i];
    }
}

}  // namespace

// With the MTP head from a sidecar (-md) on the file without one, too.
TEST(ServerArch, Qwen35HybridBatchedEqualsRun) {
    expect_served_equals_run(kDir + "rand-qwen35-tok512-d128-l4-F16.gguf",
                             kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf", /*mtp=*/false,
                             kDir + "rand-qwen35-mtp1-tok512-d128-l4-F16.sidecar.gguf");
}

// The model's own MTP head as the drafter (--spec-type mtp), beside the other drafters.
TEST(ServerArch, Qwen35MtpBatchedEqualsRun) {
    expect_served_equals_run(kDir + "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf",
                             kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf", /*mtp=*/true);
}

TEST(ServerArch, Qwen35MoeHybridBatchedEqualsRun) {
    expect_served_equals_run(kDir + "rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf",
                             kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf", /*mtp=*/false,
                             kDir + "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.sidecar.gguf");
}

// qwen35moe's own MTP head (with its routed and shared experts) as the drafter.
TEST(ServerArch, Qwen35MoeMtpBatchedEqualsRun) {
    expect_served_equals_run(kDir + "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf",
                             kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf", /*mtp=*/true);
}

TEST(ServerArch, Gemma3SlidingWindowBatchedEqualsRun) {
    expect_served_equals_run(kDir + "rand-gemma3-tok512-d128-l7-F16.gguf",
                             kDir + "rand-gemma3-tok512-d128-l6-draft-Q8_0.gguf");
}

// gemma4: layers of their own shapes and shared KV, batched over the server's slots.
TEST(ServerArch, Gemma4SharedKvBatchedEqualsRun) {
    expect_served_equals_run(kDir + "rand-gemma4-tok512-d128-l6-F16.gguf",
                             kDir + "rand-gemma4-tok512-d128-l3-draft-Q8_0.gguf");
}

// deepseek2 (MLA over a latent cache, MoE with shared experts) with its nextn head drafting too.
TEST(ServerArch, Deepseek2MtpBatchedEqualsRun) {
    expect_served_equals_run(kDir + "rand-deepseek2-mtp1-e8x2-tok512-d128-l3-F16.gguf",
                             kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf", /*mtp=*/true);
}

// glm4moe with its nextn head drafting too.
TEST(ServerArch, Glm4MoeMtpBatchedEqualsRun) {
    expect_served_equals_run(kDir + "rand-glm4moe-mtp1-e8x2-tok512-d128-l3-F16.gguf",
                             kDir + "rand-glm4moe-tok512-d128-l1-draft-Q8_0.gguf", /*mtp=*/true);
}

// nemotron_h: Mamba-2 layers whose state rolls back exactly, attention and MLP layers.
TEST(ServerArch, NemotronHHybridBatchedEqualsRun) {
    expect_served_equals_run(kDir + "rand-nemotron_h-tok512-d128-l6-F16.gguf",
                             kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf");
}
