// The draft-length sweep (`specula bench`): plain decoding against speculative decoding with
// each fixed draft length and with `auto`, over one or more prompts and several repetitions
// (configurations interleaved within each repetition, so slow drifts hit all alike). Reports per
// configuration the acceptance, tokens per target pass, median generation tok/s and the speedup
// over plain, and fits the simple model
//
//   speedup(N) = E(N) / (N c + tau(N + 1)),   E(N) = (1 - a^(N+1)) / (1 - a)
//
// with a = measured conditional acceptance per draft position, c = draft step / target pass
// (batch 1) and tau(b) = target pass over b tokens / target pass over 1 token (measured line).
// run_bench() then measures the throughput figures (bench/throughput.h) on the same target;
// bench/plot.h charts the sweep.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "bench/throughput.h"
#include "runtime/runtime.h"
#include "sampling/sampler.h"
#include "speculative/config.h"

namespace specula {

// bench's runtime: -c not given (RuntimeOptions::kCtxDefault), "bench: " lines.
RuntimeOptions bench_runtime_options();

struct BenchParams {
    // The target (-m, -ngl), the drafter (method, draft model, --draft-min, p-min, forced
    // drafts, n-gram sizes; its draft length, or auto, is the configuration marked `*` in the
    // table: what `run` would use), the context (-c; not given: the default, or at --depth what
    // the filler needs), threads and KV types (runtime/runtime.h). Its sampling is `sampling`.
    RuntimeOptions runtime = bench_runtime_options();
    std::vector<std::string> prompts;
    int n_predict = 128;
    int reps = 3;
    std::vector<int> draft_list{1, 2, 3, 4, 5, 6, 7, 8};
    bool with_auto = true;
    SamplingParams sampling{.temp = 0.f, .seed = 42};
    double synthetic_accept = -1.0;  // >= 0: SYNTHETIC acceptance (timing study only)
    bool verbose = true;             // progress lines on stderr
    bool with_spec = true;  // false: plain decoding and the throughput figures only (no draft)
    int pp = 512;           // prompt-processing test length (0: skip)
    // > 0: every figure is taken after this many cached positions (llama-bench's -d): each
    // prompt follows one shared filler of `depth` tokens, evaluated once and kept in the caches.
    int depth = 0;
    std::vector<int> pass_sizes{1, 2, 5, 9};     // batch sizes of the timed target passes
    size_t read_test_bytes = size_t{512} << 20;  // buffer of the bandwidth test (0: skip it)
};

struct BenchRow {
    std::string label;                // "plain", "1".."8", "auto"
    int n_draft = 0;                  // 0 plain, -1 auto
    double accept = 0, mean_len = 0;  // acceptance rate, tokens per target pass
    double cond_accept = 0;           // conditional acceptance per reached position
    std::vector<double> tps;          // generation tok/s per repetition
    double median_tps = 0, speedup = 0;
    double draft_step_ms = 0, target_pass_ms = 0;
    double mean_auto_n = 0;  // auto: mean chosen length (drafted / drafts)
};

struct BenchResult {
    BenchParams params;
    std::vector<BenchRow> rows;  // rows[0] is plain
    double a = 0, c = 0;         // fitted acceptance and cost ratio
    double tau_slope = 0;        // tau(b) = 1 + tau_slope (b - 1)
    Throughput tp;
    double model_speedup(int n) const;
    const BenchRow* best_fixed() const;
    const BenchRow* row(const std::string& label) const;
};

BenchResult run_bench(const BenchParams& params);
void print_bench_table(const BenchResult& r, std::FILE* out);

}  // namespace specula
