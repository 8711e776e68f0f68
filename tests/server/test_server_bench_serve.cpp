// `specula bench-serve` and its client (src/bench/serve_load.h) against a real speculative
// `specula serve`: every request completes with all its tokens, the latency figures are measured,
// the CLI writes its table, JSON and plot and refuses bad options; and the server's resident
// memory stays flat over repeated rounds of 16 concurrent clients (the batched scheduler keeps its
// buffers).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/serve_load.h"
#include "common/error.h"
#include "server/server_process.h"
#include "test_util.h"

namespace {

using specula::test::ServerProcess;
using specula::test::shared_path;

std::vector<std::string> serve_args(int parallel) {
    return {"-m",
            shared_path("models/tinystories/stories260K.gguf"),
            "-md",
            shared_path("models/tinystories/llama2xs.gguf"),
            "--draft",
            "4",
            "--parallel",
            std::to_string(parallel),
            "--max-model-len",
            "256",
            "-t",
            "2"};
}

long rss_kb(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

TEST(BenchServe, EveryRequestCompletesWithItsTokens) {
    ServerProcess s(serve_args(4), "bench-serve");
    specula::ServeLoadParams p;
    p.url = "http://127.0.0.1:" + std::to_string(s.port());
    p.clients = 4;
    p.requests_per_client = 2;
    p.max_tokens = 24;
    const specula::ServeLoadResult r = specula::run_serve_load(p);
    EXPECT_EQ(r.failed, 0) << r.first_error;
    EXPECT_EQ(r.requests, 8);
    EXPECT_EQ(r.tokens, 8 * 24);  // ignore_eos: every request generates all of max_tokens
    EXPECT_GT(r.agg_tps, 0);
    EXPECT_GT(r.ttft_p50_ms, 0);
    EXPECT_LE(r.ttft_p50_ms, r.ttft_p99_ms);
    EXPECT_LE(r.itl_p50_ms, r.itl_p99_ms);
    EXPECT_GT(r.itl_p99_ms, 0);
    // A server that is not there: counted as failed requests, not thrown.
    p.url = "http://127.0.0.1:1";
    p.clients = 2;
    const specula::ServeLoadResult bad = specula::run_serve_load(p);
    EXPECT_EQ(bad.failed, 4);
    EXPECT_NE(bad.first_error.find("connection"), std::string::npos) << bad.first_error;
    p.url = "https://127.0.0.1:1";
    EXPECT_THROW(specula::run_serve_load(p), specula::Error);
}

TEST(BenchServe, Percentiles) {
    EXPECT_EQ(specula::percentile({}, 0.5), 0);
    EXPECT_EQ(specula::percentile({3, 1, 2}, 0.5), 2);
    std::vector<double> v;
    for (int i = 1; i <= 100; ++i) v.push_back(i);
    EXPECT_EQ(specula::percentile(v, 0.99), 99);
    EXPECT_EQ(specula::percentile(v, 0.5), 50);
    EXPECT_EQ(specula::percentile(v, 1.0), 100);
}

TEST(BenchServe, CommandWritesTableJsonAndPlot) {
    ServerProcess s(serve_args(2), "bench-serve-cli");
    const std::string dir = specula::test::temp_dir("bench-serve");
    const std::string url = "http://127.0.0.1:" + std::to_string(s.port());
    const std::string cmd = specula::test::specula_bin() + " bench-serve --url " + url +
                            " --clients 1,2 --requests 1 -n 16 --label mine --json " + dir +
                            "/r.json --plot " + dir + "/r.svg > " + dir + "/out.txt 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << specula::test::read_file(dir + "/out.txt");
    const std::string out = specula::test::read_file(dir + "/out.txt");
    EXPECT_NE(out.find("| mine | 2 | 2 | 0 | 32 |"), std::string::npos) << out;
    EXPECT_NE(out.find("TPOT p99 ms"), std::string::npos) << out;
    const auto j = nlohmann::json::parse(specula::test::read_file(dir + "/r.json"));
    ASSERT_EQ(j["rows"].size(), 2u);
    EXPECT_EQ(j["rows"][1]["tokens"], 32);
    EXPECT_NE(specula::test::read_file(dir + "/r.svg").find("<polyline"), std::string::npos);
    // --with draws an earlier run in the same chart; bad options fail with a message.
    const std::string with = specula::test::specula_bin() + " bench-serve --url " + url +
                             " --clients 1 -n 8 --label again --with " + dir + "/r.json --plot " +
                             dir + "/both.svg > /dev/null 2>&1";
    ASSERT_EQ(std::system(with.c_str()), 0);
    EXPECT_NE(specula::test::read_file(dir + "/both.svg").find(">mine<"), std::string::npos);
    const std::string bad = specula::test::specula_bin() + " bench-serve --url " + url +
                            " --clients 0 > " + dir + "/bad.txt 2>&1";
    EXPECT_NE(std::system(bad.c_str()), 0);
    EXPECT_NE(specula::test::read_file(dir + "/bad.txt").find("--clients"), std::string::npos);
}

TEST(BenchServe, ServerRssStaysFlatUnderSixteenClients) {
    ServerProcess s(serve_args(16), "bench-serve-rss");
    specula::ServeLoadParams p;
    p.url = "http://127.0.0.1:" + std::to_string(s.port());
    p.clients = 16;
    p.requests_per_client = 2;
    p.max_tokens = 48;
    ASSERT_EQ(specula::run_serve_load(p).failed, 0);  // warm-up: buffers reach their size
    const long warm = rss_kb(s.pid());
    ASSERT_GT(warm, 0);
    for (int round = 0; round < 4; ++round) ASSERT_EQ(specula::run_serve_load(p).failed, 0);
    const long after = rss_kb(s.pid());
    EXPECT_LT(after, warm + warm / 20 + 2048) << "RSS grew from " << warm << " kB to " << after;
}

}  // namespace
