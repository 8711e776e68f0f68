// The draft trace over HTTP: "speculative": {"trace": true} in a completions or chat request adds
// each choice's steps as "speculative_trace" (speculative/draft_trace.h), the same steps `specula
// run --draft-trace` writes for the same prompt, also when two requests share the batched
// server's steps, and in a stream's finish chunk. Without the field there is no trace; a trace
// that is not a boolean is a 400 naming it; run refuses --draft-trace in serve.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "server/server_process.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::ServerProcess;

const char* kSpec[] = {"--spec-type", "ngram", "--draft", "3"};
constexpr int kTokens = 48;

std::pair<std::string, int> shell(const std::string& cmd) {
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) throw std::runtime_error("popen failed");
    std::string out;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
    return {out, pclose(p)};
}

// `specula run --draft-trace` for the prompt: its lines as one JSON array.
json run_trace(const std::string& prompt) {
    const std::string path = specula::test::temp_dir("spec-trace") + "/run.jsonl";
    std::string cmd = specula::test::specula_bin() + " run -q -t 1 --temp 0 -m '" +
                      specula::test::server_target_path() + "' -p '" + prompt + "' -n " +
                      std::to_string(kTokens) + " --draft-trace '" + path + "'";
    for (const char* a : kSpec) cmd += std::string(" ") + a;
    auto [out, status] = shell(cmd + " >/dev/null");
    EXPECT_EQ(status, 0) << out;
    json lines = json::array();
    std::ifstream f(path);
    for (std::string line; std::getline(f, line);) lines.push_back(json::parse(line));
    return lines;
}

json post(const ServerProcess& s, const std::string& path, const json& body, int status = 200) {
    auto res = s.client().Post(path.c_str(), body.dump(), "application/json");
    if (!res) throw std::runtime_error("no response from " + path);
    EXPECT_EQ(res->status, status) << res->body;
    return json::parse(res->body);
}

json completion_request(const std::string& prompt) {
    return {{"prompt", prompt},
            {"max_tokens", kTokens},
            {"temperature", 0},
            {"speculative", {{"trace", true}}}};
}

long accepted_sum(const json& trace) {
    long n = 0;
    for (const json& s : trace) n += s["accepted"].get<long>();
    return n;
}

class SpecTraceServer : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        std::vector<std::string> args = {
            "-m", specula::test::server_target_path(), "--parallel", "2", "-t", "1"};
        args.insert(args.end(), std::begin(kSpec), std::end(kSpec));
        server_ = new ServerProcess(args, "spec-trace");
    }
    static void TearDownTestSuite() { delete server_; }
    static ServerProcess* server_;
};
ServerProcess* SpecTraceServer::server_ = nullptr;

}  // namespace

TEST_F(SpecTraceServer, CompletionTraceEqualsRunsAlsoWhenBatched) {
    const std::string a = "Lily saw a big red ball. Lily saw a big", b = "Once upon a time";
    const json ref_a = run_trace(a), ref_b = run_trace(b);
    ASSERT_FALSE(ref_a.empty());
    EXPECT_GT(accepted_sum(ref_a), 0);
    json got_a, got_b;
    std::thread other([&] { got_b = post(*server_, "/v1/completions", completion_request(b)); });
    got_a = post(*server_, "/v1/completions", completion_request(a));
    other.join();
    EXPECT_EQ(got_a["choices"][0]["speculative_trace"], ref_a);
    EXPECT_EQ(got_b["choices"][0]["speculative_trace"], ref_b);
    EXPECT_EQ(accepted_sum(ref_a), got_a["usage"]["speculative"]["accepted"].get<long>());
    EXPECT_EQ(ref_a[0]["drafter"], "ngram");
}

TEST_F(SpecTraceServer, ChatAndStreamCarryTheTrace) {
    json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                 {"max_tokens", kTokens},
                 {"temperature", 0},
                 {"speculative", {{"trace", true}}}};
    const json r = post(*server_, "/v1/chat/completions", chat);
    const json& trace = r["choices"][0]["speculative_trace"];
    ASSERT_TRUE(trace.is_array());
    EXPECT_EQ(accepted_sum(trace), r["usage"]["speculative"]["accepted"].get<long>());

    json req = completion_request("Lily saw a big red ball. Lily saw a big");
    const json whole = post(*server_, "/v1/completions", req);
    req["stream"] = true;
    auto res = server_->client().Post("/v1/completions", req.dump(), "application/json");
    ASSERT_TRUE(res);
    json finish;
    for (size_t at = 0; (at = res->body.find("data: {", at)) != std::string::npos; ++at) {
        const json chunk = json::parse(res->body.substr(at + 6, res->body.find('\n', at) - at - 6));
        if (!chunk["choices"].empty() && !chunk["choices"][0]["finish_reason"].is_null())
            finish = chunk["choices"][0];
    }
    EXPECT_EQ(finish["speculative_trace"], whole["choices"][0]["speculative_trace"]);
}

TEST_F(SpecTraceServer, NoTraceUnlessAskedAndABadOneIsNamed) {
    json req = completion_request("Once upon a time");
    req.erase("speculative");
    EXPECT_FALSE(
        post(*server_, "/v1/completions", req)["choices"][0].contains("speculative_trace"));
    req["speculative"] = {{"trace", "yes"}};
    const json err = post(*server_, "/v1/completions", req, 400);
    EXPECT_NE(err.dump().find("speculative.trace"), std::string::npos) << err.dump();
    auto [out, status] = shell(specula::test::specula_bin() + " serve -m '" +
                               specula::test::server_target_path() + "' --draft-trace x.jsonl");
    EXPECT_NE(status, 0);
    EXPECT_NE(out.find("--draft-trace is for `specula run`"), std::string::npos) << out;
}
