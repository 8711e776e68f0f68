// `specula bench`: see cmd_bench.h.
#include "cli/cmd_bench.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/plot.h"
#include "bench/sweep.h"
#include "cli/cli_util.h"
#include "cli/speculative_options.h"
#include "common/error.h"
#include "common/stop_signals.h"

namespace specula::cli {

namespace {

// The built-in prompt set: TinyStories-style openings (the benchmark targets are TinyStories
// models), used when neither -p nor -f is given.
const char* const kDefaultPrompts[] = {
    "Once upon a time, there was a little girl named Lily. She loved to",
    "Tom and his dog went to the park. They saw a big tree and",
    "The sun was shining. Mom said, \"Let's go to the beach!\" Ben was so happy that he",
    "One day, a little bird could not find its nest. It flew to the old farm and",
};

std::vector<std::string> read_prompts(const BenchOptions& o) {
    std::vector<std::string> prompts;
    if (!o.prompt_file.empty()) {
        std::ifstream f(o.prompt_file);
        if (!f) fail("cannot open prompts file ", o.prompt_file);
        std::string line;
        while (std::getline(f, line))
            if (!line.empty()) prompts.push_back(line);
        if (prompts.empty()) fail("prompts file ", o.prompt_file, " has no non-empty line");
    } else if (!o.prompt.empty()) {
        prompts.push_back(o.prompt);
    } else {
        prompts.assign(std::begin(kDefaultPrompts), std::end(kDefaultPrompts));
    }
    return prompts;
}

nlohmann::json to_json(const BenchResult& r) {
    nlohmann::json rows = nlohmann::json::array();
    for (const BenchRow& row : r.rows)
        rows.push_back({{"n", row.label},
                        {"acceptance", row.accept},
                        {"mean_length", row.mean_len},
                        {"conditional_acceptance", row.cond_accept},
                        {"tokens_per_s", row.tps},
                        {"median_tokens_per_s", row.median_tps},
                        {"speedup", row.speedup},
                        {"target_pass_ms", row.target_pass_ms},
                        {"draft_step_ms", row.draft_step_ms},
                        {"mean_auto_length", row.mean_auto_n}});
    nlohmann::json passes = nlohmann::json::array();
    for (const PassRow& pr : r.tp.passes)
        passes.push_back({{"batch", pr.batch}, {"ms", pr.ms}, {"tau", pr.tau}});
    nlohmann::json rollbacks = nlohmann::json::array();
    for (const RollbackRow& rr : r.tp.rollbacks)
        rollbacks.push_back({{"batch", rr.batch},
                             {"keep", rr.keep},
                             {"ms", rr.ms},
                             {"base_ms", rr.base_ms},
                             {"ratio", rr.ratio}});
    const nlohmann::json throughput{
        {"read_gb_per_s", r.tp.read_gbs},     {"bytes_per_token", r.tp.bytes_per_token},
        {"kv_bytes_per_pass", r.tp.kv_bytes}, {"pp_tokens", r.params.pp},
        {"pp_tokens_per_s", r.tp.pp_tps},     {"depth", r.params.depth},
        {"tg_tokens_per_s", r.tp.tg_tps},     {"passes", passes},
        {"recurrent_rollbacks", rollbacks}};
    return {{"synthetic_acceptance", r.params.synthetic_accept},
            {"throughput", throughput},
            {"a", r.a},
            {"c", r.c},
            {"tau_slope", r.tau_slope},
            {"rows", rows}};
}

}  // namespace

std::vector<int> parse_list(const std::string& s, const char* what) {
    std::vector<int> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        try {
            size_t used = 0;
            const int n = std::stoi(item, &used);
            if (used != item.size() || n < 1 || n > 64) throw std::invalid_argument(item);
            out.push_back(n);
        } catch (const std::exception&) {
            fail(what, ": expected comma-separated numbers 1..64, got '", s, "'");
        }
    }
    if (out.empty()) fail(what, " is empty");
    return out;
}

void add_bench_options(CLI::App& cmd, BenchOptions& o) {
    cmd.add_option("-m,--model", o.model, "target GGUF model")->required();
    add_speculative_options(cmd, o.spec);
    cmd.add_option("-p,--prompt", o.prompt,
                   "one prompt (default: 4 built-in TinyStories openings)");
    cmd.add_option("-f,--file", o.prompt_file, "prompts file, one prompt per line");
    cmd.add_option("-n,--n-predict", o.n_predict, "tokens per generation")->capture_default_str();
    cmd.add_option("-r,--repetitions", o.reps, "repetitions")->capture_default_str();
    cmd.add_option("--draft-list", o.draft_list, "fixed draft lengths")->capture_default_str();
    cmd.add_flag("--no-auto", o.no_auto, "skip --draft auto");
    cmd.add_option("--temp", o.temp, "temperature (<= 0: greedy)")->capture_default_str();
    cmd.add_option("--top-k", o.top_k)->capture_default_str();
    cmd.add_option("--top-p", o.top_p)->capture_default_str();
    cmd.add_option("--min-p", o.min_p)->capture_default_str();
    cmd.add_option("--typical", o.typical_p)->capture_default_str();
    cmd.add_option("--top-nsigma", o.top_n_sigma)->capture_default_str();
    cmd.add_option("-s,--seed", o.seed)->capture_default_str();
    cmd.add_option("--synthetic-acceptance", o.synthetic_acceptance,
                   "accept each draft token with this probability (SYNTHETIC, timing only)");
    cmd.add_option("--plot", o.plot, "write an SVG plot of speedup vs N");
    cmd.add_option("--json", o.json, "write the results as JSON");
    cmd.add_option("-t,--threads", o.n_threads, "threads (default: hardware threads)");
    cmd.add_option("--ubatch-size", o.n_ubatch,
                   "the most tokens one pass takes (llama.cpp's -ub): longer prompts go in passes "
                   "of this many")
        ->capture_default_str();
    cmd.add_option("-c,--ctx-size", o.n_ctx,
                   "context of every session (0: the model's training context; default: that, "
                   "at most 4096, or what --depth needs)");
    cmd.add_option("--cache-type-k", o.cache_type_k, "KV cache type of K: f32, f16 or q8_0 (-ctk)")
        ->capture_default_str();
    cmd.add_option("--cache-type-v", o.cache_type_v, "KV cache type of V: f32, f16 or q8_0 (-ctv)")
        ->capture_default_str();
    cmd.add_flag("--no-spec", o.no_spec,
                 "plain decoding and throughput only (pp, tg, pass costs); no draft needed");
    cmd.add_option("--pp", o.pp, "prompt-processing test length (0: skip)")->capture_default_str();
    cmd.add_option("--batches", o.batches, "batch sizes of the timed target passes")
        ->capture_default_str();
    cmd.add_option("-d,--depth,--n-depth", o.depth,
                   "measure everything after this many cached positions (llama-bench's -d)")
        ->capture_default_str();
}

int cmd_bench(const BenchOptions& o) {
    exit_on_stop_signals("bench", "");
    // -1 (the default) is off; written so that NaN fails too.
    if (o.synthetic_acceptance != -1.0 &&
        !(o.synthetic_acceptance >= 0.0 && o.synthetic_acceptance <= 1.0))
        fail("--synthetic-acceptance must be in [0, 1], got ", o.synthetic_acceptance);
    if (o.n_predict < 1) fail("-n must be >= 1 for bench, got ", o.n_predict);
    if (!(o.typical_p >= 0.f && o.typical_p <= 1.f))
        fail("--typical must be in [0, 1], got ", o.typical_p);
    const uint64_t seed = parse_seed(o.seed, /*allow_random=*/false);
    if (o.pp < 0 || o.pp > 65536) fail("--pp must be in [0, 65536], got ", o.pp);
    if (o.depth < 0 || o.depth > 1 << 20) fail("--depth must be in [0, 1048576], got ", o.depth);
    if (o.n_ctx < RuntimeOptions::kCtxDefault) fail("-c (--ctx-size) must be >= 0, got ", o.n_ctx);
    BenchParams p;
    RuntimeOptions& rt = p.runtime;
    rt.model_path = o.model;
    rt.gpu = o.placement.target;
    rt.repack_cache = o.repack_cache;
    rt.speculative = parse_speculative_cli(o.spec, "bench");  // parsed once: every flag honoured
    rt.speculative.draft_gpu = o.placement.draft;
    rt.n_ctx = o.n_ctx;  // 0: the training context; not given: the default (or --depth's need)
    rt.n_threads = o.n_threads;
    rt.n_ubatch = o.n_ubatch;
    rt.type_k = parse_kv_type(o.cache_type_k, "-ctk (--cache-type-k)");
    rt.type_v = parse_kv_type(o.cache_type_v, "-ctv (--cache-type-v)");
    p.prompts = read_prompts(o);
    p.n_predict = o.n_predict;
    p.reps = o.reps;
    p.draft_list = parse_list(o.draft_list);
    p.with_auto = !o.no_auto;
    p.sampling =
        SamplingParams{o.temp, o.top_k, o.top_p, o.min_p, seed, o.typical_p, o.top_n_sigma};
    p.synthetic_accept = o.synthetic_acceptance;
    p.with_spec = !o.no_spec;
    p.pp = o.pp;
    p.depth = o.depth;
    p.pass_sizes = parse_list(o.batches, "--batches");
    const BenchResult r = run_bench(p);
    if (p.with_spec) print_bench_table(r, stdout);
    print_throughput_table(r.tp, stdout);
    if (!o.plot.empty()) write_bench_svg(r, o.plot);
    if (!o.json.empty()) {
        std::ofstream f(o.json);
        if (!f) fail("cannot write ", o.json);
        f << to_json(r).dump(1) << "\n";
    }
    return 0;
}

}  // namespace specula::cli
