// EAGLE-3 heads through the commands (tests/data/eagle3's random-weight heads for the TinyStories
// targets): `specula run --spec-type eagle3 -md HEAD` (and draft-eagle3, vLLM's
// --speculative-config {"method": "eagle3", "model": HEAD}) prints what plain greedy decoding
// prints, and `specula serve` with the head on two slots answers two requests at once with the
// same texts; a head for another target is refused naming the key and both files.
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

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/eagle3/";
const char* kPrompts[] = {"Once upon a time there was", "The little dog ran to the"};
constexpr int kTokens = 40;

std::string run_greedy(const std::string& model, const std::string& prompt,
                       const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {
        "run",    "-m", model,          "-p", prompt, "-n", std::to_string(kTokens),
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

void expect_eagle3_equals_plain(const std::string& model, const std::string& head) {
    std::vector<std::string> expected;
    for (const char* p : kPrompts) expected.push_back(run_greedy(model, p));
    ASSERT_FALSE(expected[0].empty());
    for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(
            run_greedy(model, kPrompts[i], {"--spec-type", "eagle3", "-md", head, "--draft", "3"}),
            expected[i]);
        EXPECT_EQ(run_greedy(model, kPrompts[i],
                             {"--speculative-config", R"({"method": "eagle3", "model": ")" + head +
                                                          R"(", "num_speculative_tokens": 5})"}),
                  expected[i]);
    }
    ServerProcess s({"-m", model, "-np", "2", "-c", "512", "-t", "2", "--spec-type", "draft-eagle3",
                     "-md", head, "--draft", "4"},
                    "eagle3");
    std::vector<std::future<std::string>> replies;
    for (const char* p : kPrompts)
        replies.push_back(std::async(std::launch::async, [&s, p] { return complete(s, p); }));
    for (size_t i = 0; i < replies.size(); ++i)
        EXPECT_EQ(replies[i].get(), expected[i]) << head << ": " << kPrompts[i];
}

}  // namespace

TEST(ServerEagle3, Stories260KHeadEqualsPlainInRunAndServe) {
    expect_eagle3_equals_plain(specula::test::shared_path("models/tinystories/stories260K.gguf"),
                               kDir + "stories260K-eagle3.gguf");
}

TEST(ServerEagle3, Llama2xsHeadEqualsPlainInRunAndServe) {
    expect_eagle3_equals_plain(specula::test::shared_path("models/tinystories/llama2xs.gguf"),
                               kDir + "llama2xs-eagle3.gguf");
}

// The llama2xs head reads layer 3's input: on a two-layer target it is refused, naming the key
// and both files, before anything runs.
TEST(ServerEagle3, HeadForAnotherTargetIsRefused) {
    const std::string target =
        specula::test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-F32.gguf");
    const std::string head = kDir + "llama2xs-eagle3.gguf";
    const auto r = specula::test::run_specula(
        {"run", "-m", target, "-p", "Hi", "-n", "4", "--spec-type", "eagle3", "-md", head});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("eagle3.target_hidden_size"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(head), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(target), std::string::npos) << r.err;
}
