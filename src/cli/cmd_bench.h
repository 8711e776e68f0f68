// `specula bench`: plain vs speculative decoding for a range of draft lengths and `auto`
// (speculative/bench.h does the work). Wiring in main.cpp:
//   BenchOptions bench_opt;
//   CLI::App* bench = app.add_subcommand("bench", "speculative decoding benchmark");
//   add_bench_options(*bench, bench_opt);
//   ... if (bench->parsed()) return cmd_bench(bench_opt);
// (and map "-md" to "--model-draft" in normalize_arg). cmd_bench(argc, argv) parses on its own.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace specula::cli {

struct BenchOptions {
    std::string model;        // -m
    std::string model_draft;  // -md / --model-draft
    bool lookup = false;      // --lookup: n-gram drafting instead of a draft model
    std::string prompt;       // -p
    std::string prompt_file;  // -f: one prompt per non-empty line
    int n_predict = 128;      // -n
    int reps = 3;             // -r
    std::string draft_list = "1,2,3,4,5,6,7,8";
    bool no_auto = false;
    float temp = 0.0f;
    int top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    long long seed = 42;
    float p_min = 0.0f;
    double synthetic_acceptance = -1.0;
    std::string plot;  // --plot FILE.svg
    std::string json;  // --json FILE
    int n_threads = 0;
    bool no_spec = false;             // --no-spec: throughput figures only
    int pp = 512;                     // --pp
    std::string batches = "1,2,5,9";  // --batches
};

void add_bench_options(CLI::App& cmd, BenchOptions& o);
int cmd_bench(const BenchOptions& o);
int cmd_bench(int argc, char** argv);  // argv[0] is the command name

}  // namespace specula::cli
