// Gemma 4's assistant through the commands (tests/data/arch's random-weight assistant files for
// rand-gemma4-tok512-d128-l6-F16): `specula run --spec-type gemma4-assistant -md ASSISTANT`, vLLM's
// --speculative-config {"method": "gemma4-assistant", "model": ...} and `--spec-type mtp` with the
// gemma4_mtp file (ik_llama.cpp's way) print what plain greedy decoding prints, and `specula serve`
// with the assistant on two slots answers two requests at once with the same texts; an assistant
// for another target is refused naming the key and both files; the memory plan counts it.
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
const std::string kTarget = kDir + "rand-gemma4-tok512-d128-l6-F16.gguf";
const std::string kAssistant = kDir + "rand-gemma4-assistant-tok512-d64-l2-F16.gguf";
const std::string kMtp = kDir + "rand-gemma4-mtp-tok512-d64-l2-F16.gguf";
const char* kPrompts[] = {"Once upon a time there was", "The little dog ran to the"};
constexpr int kTokens = 40;

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

TEST(ServerGemma4Assistant, EqualsPlainInRunAndServe) {
    std::vector<std::string> expected;
    for (const char* p : kPrompts) expected.push_back(run_greedy(p));
    ASSERT_FALSE(expected[0].empty());
    for (size_t i = 0; i < expected.size(); ++i)
        EXPECT_EQ(run_greedy(kPrompts[i], {"--spec-type", "gemma4-assistant", "-md", kAssistant,
                                           "--draft", "3"}),
                  expected[i]);
    // The other spellings on one prompt (a process each: kept few for the sanitizer build).
    EXPECT_EQ(run_greedy(kPrompts[0], {"--spec-type", "mtp", "-md", kMtp, "--draft", "2"}),
              expected[0]);
    EXPECT_EQ(run_greedy(kPrompts[0], {"--speculative-config",
                                       R"({"method": "gemma4-assistant", "model": ")" + kAssistant +
                                           R"(", "num_speculative_tokens": 4})"}),
              expected[0]);
    // The server's texts replace the random model's invalid UTF-8 (run prints its bytes): its
    // speculative answers are compared with its own plain ones.
    std::vector<std::string> plain;
    {
        ServerProcess s({"-m", kTarget, "-np", "2", "-c", "512", "-t", "2"}, "gemma4_plain");
        for (const char* p : kPrompts) plain.push_back(complete(s, p));
    }
    ServerProcess s({"-m", kTarget, "-np", "2", "-c", "512", "-t", "2", "--spec-type",
                     "gemma4-assistant", "-md", kAssistant, "--draft", "3"},
                    "gemma4_assistant");
    std::vector<std::future<std::string>> replies;
    for (const char* p : kPrompts)
        replies.push_back(std::async(std::launch::async, [&s, p] { return complete(s, p); }));
    for (size_t i = 0; i < replies.size(); ++i)
        EXPECT_EQ(replies[i].get(), plain[i]) << kPrompts[i];
}

// On a llama target (stories260K) the assistant is refused before anything runs, naming both
// files; a gemma4_mtp file is no draft model either.
TEST(ServerGemma4Assistant, AssistantForAnotherTargetIsRefused) {
    const std::string llama = specula::test::shared_path("models/tinystories/stories260K.gguf");
    auto r = specula::test::run_specula({"run", "-m", llama, "-p", "Hi", "-n", "4", "--spec-type",
                                         "gemma4-assistant", "-md", kAssistant});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("is 'llama'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(kAssistant), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(llama), std::string::npos) << r.err;
    r = specula::test::run_specula({"run", "-m", kTarget, "-p", "Hi", "-n", "4", "-md", kMtp});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("--spec-type gemma4-assistant"), std::string::npos) << r.err;
}

// The memory plan counts the assistant's weights (it has no cache of its own).
TEST(ServerGemma4Assistant, MemoryPlanCountsItsWeights) {
    const auto r =
        specula::test::run_specula({"run", "-m", kTarget, "-p", "Hi", "-n", "2", "--spec-type",
                                    "gemma4-assistant", "-md", kAssistant, "-t", "1"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("Gemma 4 assistant"), std::string::npos) << r.err;
}
