// Server metrics in the Prometheus text format, twice: under vLLM's exact names with a
// model_name label, so that vLLM's Grafana dashboards and alerts work unmodified, and under the
// older `specula:` names (no label), kept for existing scrapers.
//   vllm:spec_decode_num_drafts_total, vllm:spec_decode_num_draft_tokens_total,
//   vllm:spec_decode_num_accepted_tokens_total,
//   vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0".."k"} (counters, summed over
//   finished requests' SpecStats), vllm:spec_decode_draft_acceptance_rate (gauge: accepted /
//   drafted so far); vllm:request_success_total{finished_reason}, vllm:prompt_tokens_total,
//   vllm:generation_tokens_total, vllm:num_preemptions_total (the KV pool's),
//   vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total (prompt tokens looked up in
//   the slots' caches and found there) (counters);
//   vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc (gauges; the
//   last is the fraction, 0..1, of all slots' KV positions in use, or of the KV pool's);
//   vllm:e2e_request_latency_seconds, vllm:time_to_first_token_seconds,
//   vllm:time_per_output_token_seconds, vllm:request_queue_time_seconds (arrival to a slot),
//   vllm:request_prompt_tokens, vllm:request_generation_tokens (histograms).
//   specula:request_failure_total{status} counts refused requests (no vLLM name). The specula: set:
//   the same without the model_name label, the spec_decode counters without the _total suffix
//   (specula:spec_decode_num_drafts, ...). Specula only (specula: prefix):
//   specula:prompt_tokens_cached_total (prefix reuse), specula:batch_passes_total,
//   specula:batch_rows_total, specula:batch_pass_seconds_total (counters of the scheduler's batched
//   passes), specula:batch_sequences, specula:batch_rows, specula:spec_decode_draft_length_by_load
//   (gauges: the last pass; -1: no slot adapts); specula:draft_batch_passes_total,
//   specula:draft_batch_sequences_total, specula:draft_batch_seconds_total (counters of the draft
//   model's batched passes: passes, sequences summed over them, time);
//   specula:spec_decode_num_forced_tokens_total,
//   specula:spec_decode_num_forced_accepted_tokens_total (counters: grammar-forced draft tokens,
//   speculative/drafters/forced_drafts.h, proposed and accepted; they are in the draft / accepted
//   token counts too).
// Thread-safe: every request thread records into one Metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "speculative/stats.h"

namespace specula {

class Histogram {
  public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double x);
    // labels: "" or `key="value"` pairs (comma-separated) for every sample.
    void render(std::string& out, const std::string& name, const std::string& help,
                const std::string& labels = "") const;

  private:
    std::vector<double> bounds_;
    std::vector<long> counts_;  // per bucket (not cumulative); the last is +Inf
    double sum_ = 0;
    long count_ = 0;
};

// The server's KV pool (server/serving/kv_pool.h) as the scheduler reports it: its positions, those
// counted now, the requests waiting for room, the waits that timed out, the idle slots emptied.
struct KvPoolGauges {
    int64_t capacity = 0;
    int64_t used = 0;    // reserved by running requests
    int64_t cached = 0;  // held by idle slots' prefixes (evictable)
    int waiting = 0;
    long timeouts = 0, evictions = 0;
    long preemptions = 0;  // running requests preempted (kv_pool.h), vLLM's num_preemptions
    // Shared prompt prefixes (server/serving/prefix_blocks.h), when on: the positions their
    // blocks hold (each once), the blocks, the slots reading one.
    bool prefixes = false;
    int64_t shared = 0;
    long shared_blocks = 0, shared_readers = 0;
};

class Metrics {
  public:
    Metrics();

    void add_waiting(int delta);
    void add_running(int delta);
    // A request that generated (finished normally, by a stop, or cancelled: "abort").
    void record_request(const SpecStats& st, const std::string& finish_reason, double e2e_s,
                        double ttft_s);
    void record_failure(int status);
    // A request got a slot `wait_s` seconds after it arrived (the time it was queued).
    void record_queue_time(double wait_s);
    // Prompt tokens a request found in its slot's cache (prefix reuse: not evaluated again) of
    // its n_prompt: vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total.
    void record_cached(long n_tokens, long n_prompt);
    // One batched target pass of the scheduler: sequences, rows, its time, and the draft length
    // chosen by load for it (-1: no slot adapts).
    void record_pass(int n_seqs, int n_rows, double ms, int draft_by_load);
    // One step's batched drafting: `passes` draft-model passes over `seqs` sequences in all.
    void record_draft_passes(int passes, int seqs, double ms);
    void set_model_name(const std::string& name);
    // KV cache usage: slots x positions in all, and the positions slot `slot` now holds.
    void set_kv_capacity(int n_slots, int n_ctx);
    void set_kv_tokens(int slot, int n_tokens);

    // --cache-ram's pool, rendered as specula:prompt_cache_* (hits, misses, evictions, bytes,
    // entries, the bound); null: none.
    void set_prompt_cache(const class PromptCache* cache) { prompt_cache_ = cache; }
    // The KV pool's gauges, read at every render: specula:kv_pool_positions,
    // specula:kv_pool_used_positions (running requests' reservations),
    // specula:kv_pool_cached_positions (idle slots' prefixes, evictable),
    // specula:kv_pool_waiting_requests (waiting for pool room, not for a slot),
    // specula:kv_pool_timeouts_total, specula:kv_pool_evictions_total; and
    // vllm:kv_cache_usage_perc becomes used / positions (as vLLM, cached free blocks do not
    // count). Empty: no pool.
    void set_kv_pool(std::function<KvPoolGauges()> source) { kv_pool_ = std::move(source); }

    std::string render() const;

  private:
    const class PromptCache* prompt_cache_ = nullptr;
    std::function<KvPoolGauges()> kv_pool_;
    void render_set(std::string& out, bool vllm) const;

    mutable std::mutex mu_;
    long running_ = 0, waiting_ = 0;
    long prompt_tokens_ = 0, generation_tokens_ = 0, cached_tokens_ = 0, queried_tokens_ = 0;
    long passes_ = 0, pass_rows_ = 0;
    int last_seqs_ = 0, last_rows_ = 0, last_draft_ = -1;
    double pass_ms_ = 0;
    long draft_passes_ = 0, draft_seqs_ = 0;
    double draft_ms_ = 0;
    long num_drafts_ = 0, num_draft_tokens_ = 0, num_accepted_ = 0;
    long num_forced_ = 0, num_forced_accepted_ = 0;
    std::vector<long> accepted_per_pos_;
    std::map<std::string, long> success_;  // by finished_reason
    std::map<int, long> failure_;          // by HTTP status
    Histogram e2e_, ttft_, tpot_, queue_, req_prompt_, req_gen_;
    std::string model_name_;
    std::vector<long> kv_tokens_;  // per slot
    long kv_capacity_ = 0;
};

}  // namespace specula
