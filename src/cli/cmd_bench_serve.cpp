// `specula bench-serve`: see cmd_bench_serve.h.
#include "cli/cmd_bench_serve.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/serve_load.h"
#include "cli/cli_util.h"
#include "cli/cmd_bench.h"
#include "common/error.h"

namespace specula::cli {

namespace {

using json = nlohmann::json;

json to_json(const ServeLoadResult& r) {
    return {{"clients", r.clients},         {"requests", r.requests},
            {"failed", r.failed},           {"tokens", r.tokens},
            {"wall_s", r.wall_s},           {"agg_tps", r.agg_tps},
            {"ttft_p50_ms", r.ttft_p50_ms}, {"ttft_p99_ms", r.ttft_p99_ms},
            {"itl_p50_ms", r.itl_p50_ms},   {"itl_p99_ms", r.itl_p99_ms},
            {"tpot_p50_ms", r.tpot_p50_ms}, {"tpot_p99_ms", r.tpot_p99_ms}};
}

std::pair<std::string, std::vector<ServeLoadResult>> read_run(const std::string& path) {
    const json j = json::parse(read_text_file(path), nullptr, false);
    if (j.is_discarded() || !j.contains("label") || !j.contains("rows"))
        fail(path, ": not a bench-serve --json file (needs \"label\" and \"rows\")");
    std::vector<ServeLoadResult> rows;
    for (const json& r : j["rows"]) {
        ServeLoadResult x;
        x.clients = r.value("clients", 1);
        x.agg_tps = r.value("agg_tps", 0.0);
        rows.push_back(x);
    }
    return {j["label"].get<std::string>(), rows};
}

}  // namespace

CLI::App* add_bench_serve_command(CLI::App& app, BenchServeOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "bench-serve", "load benchmark of a running server: N concurrent streaming clients");
    cmd->add_option("--url", o.url, "the server's base URL")->capture_default_str();
    cmd->add_option("--clients", o.clients, "client counts, one run each")->capture_default_str();
    cmd->add_option("--requests", o.requests, "requests per client, one after another")
        ->capture_default_str();
    cmd->add_option("-n,--n-predict", o.n_predict, "tokens per request (max_tokens, ignore_eos)")
        ->capture_default_str();
    cmd->add_option("--draft", o.n_draft,
                    "send speculative.num_speculative_tokens (Specula's per-request field)");
    cmd->add_option("--model", o.model, "the request's model field");
    cmd->add_option("--label", o.label, "the server's name in the table and plot")
        ->capture_default_str();
    cmd->add_option("--json", o.json, "write the rows as JSON");
    cmd->add_option("--plot", o.plot, "write an SVG chart of aggregate tok/s by clients");
    cmd->add_option("--with", o.with, "earlier --json files to draw in the same --plot");
    cmd->add_option("--timeout", o.timeout_s, "seconds per request")->capture_default_str();
    return cmd;
}

int cmd_bench_serve(const BenchServeOptions& o) {
    if (o.requests < 1) fail("--requests must be >= 1, got ", o.requests);
    if (o.n_predict < 1) fail("-n must be >= 1, got ", o.n_predict);
    if (o.timeout_s < 1) fail("--timeout must be >= 1, got ", o.timeout_s);
    const std::vector<int> clients = parse_list(o.clients, "--clients");
    std::vector<std::pair<std::string, std::vector<ServeLoadResult>>> runs;
    for (const std::string& f : o.with) runs.push_back(read_run(f));  // bad files fail first
    std::vector<ServeLoadResult> rows;
    int failed = 0;
    for (int c : clients) {
        ServeLoadParams p;
        p.url = o.url;
        p.model = o.model;
        p.clients = c;
        p.requests_per_client = o.requests;
        p.max_tokens = o.n_predict;
        p.n_draft = o.n_draft;
        p.timeout_s = o.timeout_s;
        std::fprintf(stderr, "bench-serve: %d client(s) x %d request(s) of %d tokens against %s\n",
                     c, o.requests, o.n_predict, o.url.c_str());
        rows.push_back(run_serve_load(p));
        if (rows.back().failed) {
            failed += rows.back().failed;
            std::fprintf(stderr, "bench-serve: %d request(s) failed: %s\n", rows.back().failed,
                         rows.back().first_error.c_str());
        }
    }
    std::fputs(serve_load_table(rows, o.label).c_str(), stdout);
    if (!o.json.empty()) {
        json j = {{"label", o.label},
                  {"url", o.url},
                  {"n_predict", o.n_predict},
                  {"rows", json::array()}};
        for (const auto& r : rows) j["rows"].push_back(to_json(r));
        std::ofstream f(o.json);
        if (!(f << j.dump(2) << "\n")) fail("cannot write ", o.json);
    }
    if (!o.plot.empty()) {
        runs.emplace_back(o.label, rows);
        write_serve_load_svg(runs, o.plot);
    }
    return failed ? 1 : 0;
}

}  // namespace specula::cli
