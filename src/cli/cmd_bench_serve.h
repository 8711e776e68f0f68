// `specula bench-serve`: the load benchmark of a running OpenAI-compatible server (Specula,
// llama-server, ...): for each client count, N concurrent streaming clients send greedy requests
// and the table gives aggregate generation tok/s, TTFT and inter-token latency p50/p99
// (src/bench/serve_load.h measures). --json writes the rows; --plot draws them, with the rows of
// earlier --json files given by --with, as one chart.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace specula::cli {

struct BenchServeOptions {
    std::string url = "http://127.0.0.1:8080";
    std::string clients = "1,4,16";
    int requests = 2;  // per client
    int n_predict = 64;
    int n_draft = -1;
    std::string model;
    std::string label = "server";
    std::string json;               // --json FILE
    std::string plot;               // --plot FILE.svg
    std::vector<std::string> with;  // --with FILE.json (earlier runs for the plot)
    int timeout_s = 600;
};

CLI::App* add_bench_serve_command(CLI::App& app, BenchServeOptions& o);
int cmd_bench_serve(const BenchServeOptions& o);

}  // namespace specula::cli
