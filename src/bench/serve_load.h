// run_serve_load(): the load benchmark behind `specula bench-serve`. N clients, each on its own
// thread and connection, send streaming OpenAI completions (greedy, `max_tokens` tokens,
// ignore_eos so every request generates all of them) one after another to a running server
// (Specula, llama-server, vLLM: anything OpenAI-compatible), every client with its own prompts.
// Measured per run: aggregate generation tokens/s (all completion tokens over the wall time from
// the first request to the last reply), time to first token (request sent to first text) and
// inter-token latency (each streamed text chunk's gap since the previous one, spread evenly over
// the tokens it carries; p50 / p99 over every token of every request; speculative servers send
// accepted drafts in bursts, so its p50 can be ~0) and time per output token (TPOT, vLLM's: per
// request, the time from its first to its last text over its tokens after the first).
// Tokens per chunk: Specula's `choices[0].specula.tokens`, otherwise one; completion tokens: the
// final `usage` when the server sends one, otherwise the chunks counted.
#pragma once

#include <string>
#include <vector>

namespace specula {

struct ServeLoadParams {
    std::string url = "http://127.0.0.1:8080";  // the server's base URL
    std::string model;                          // "model" field ("" : omitted)
    int clients = 1;
    int requests_per_client = 1;
    int max_tokens = 64;
    int n_draft = -1;     // >= 0: send speculative.num_speculative_tokens (Specula's field)
    int timeout_s = 600;  // per request
};

struct ServeLoadResult {
    int clients = 0;
    int requests = 0, failed = 0;
    long tokens = 0;
    double wall_s = 0;
    double agg_tps = 0;  // tokens / wall_s
    double ttft_p50_ms = 0, ttft_p99_ms = 0;
    double itl_p50_ms = 0, itl_p99_ms = 0;
    double tpot_p50_ms = 0,
           tpot_p99_ms = 0;   // per request: (last text - first text) / (tokens - 1)
    std::string first_error;  // of a failed request, for the report
};

// Throws Error for a URL it cannot use; failed requests are counted, not thrown.
ServeLoadResult run_serve_load(const ServeLoadParams& p);

// The value below which a fraction q of `v` lies (nearest rank); 0 for an empty v.
double percentile(std::vector<double> v, double q);

// The rows as a table (stdout) and an SVG chart of aggregate tok/s and p99 latency by clients.
std::string serve_load_table(const std::vector<ServeLoadResult>& rows, const std::string& label);
void write_serve_load_svg(
    const std::vector<std::pair<std::string, std::vector<ServeLoadResult>>>& runs,
    const std::string& path);

}  // namespace specula
