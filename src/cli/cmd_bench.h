// `specula bench`: plain vs speculative decoding for a range of draft lengths and `auto`, then
// the throughput figures (src/bench/ does the work). main.cpp declares the options with
// add_bench_options() on its `bench` subcommand and calls cmd_bench() when it was parsed. The
// speculative options are run's (cli/speculative_options.h), all honoured (--draft-min, the
// forced drafts); --draft marks its row with `*`; -c follows the runtime's rule (0: training).
#pragma once

#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "speculative/config.h"

namespace CLI {
class App;
}

namespace specula::cli {

struct BenchOptions {
    std::string model;         // -m
    Placement placement;       // -ngl / -ngld / --device (cli/gpu_flags.h)
    std::string repack_cache;  // --repack-cache DIR
    SpeculativeFlags spec;     // -md, --spec-type ngram / --lookup, --draft-p-min, ...
    std::string prompt;        // -p
    std::string prompt_file;   // -f: one prompt per non-empty line
    int n_predict = 128;       // -n
    int reps = 3;              // -r
    std::string draft_list = "1,2,3,4,5,6,7,8";
    bool no_auto = false;
    float temp = 0.0f;
    int top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float typical_p = 1.0f;     // --typical
    float top_n_sigma = -1.0f;  // --top-nsigma
    std::string seed = "42";    // cli_util parse_seed (no -1: bench is reproducible)
    double synthetic_acceptance = -1.0;
    std::string plot;  // --plot FILE.svg
    std::string json;  // --json FILE
    int n_threads = 0;
    int n_ctx = RuntimeOptions::kCtxDefault;                 // -c (runtime/runtime.h)
    int n_ubatch = SessionParams::kDefaultUbatch;            // -ub (--ubatch-size)
    std::string cache_type_k = "f16", cache_type_v = "f16";  // -ctk / -ctv
    bool no_spec = false;                                    // --no-spec: throughput figures only
    int pp = 512;                                            // --pp
    int depth = 0;                                           // --depth
    std::string batches = "1,2,5,9";                         // --batches
};

void add_bench_options(CLI::App& cmd, BenchOptions& o);
// "1,2,5" -> {1, 2, 5}; each 1..64. Throws Error naming `what`.
std::vector<int> parse_list(const std::string& s, const char* what = "--draft-list");
int cmd_bench(const BenchOptions& o);

}  // namespace specula::cli
