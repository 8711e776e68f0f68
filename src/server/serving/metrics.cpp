// Prometheus metrics: see metrics.h.
#include "server/serving/metrics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "server/serving/prompt_cache.h"

namespace specula {

namespace {

// The shortest decimal that reads back as x (0.1, not 0.10000000000000001).
std::string num(double x) {
    char buf[64];
    for (int prec = 6; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (std::strtod(buf, nullptr) == x) break;
    }
    return buf;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// A label value with \, " and newlines escaped (the text format's rules).
std::string escape_label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double x) {
    size_t i = 0;
    while (i < bounds_.size() && x > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += x;
    ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
    header(out, name, "histogram", help.c_str());
    const std::string pre = labels.empty() ? "{" : "{" + labels + ",";
    const std::string plain = labels.empty() ? "" : "{" + labels + "}";
    long cum = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cum += counts_[i];
        out += name + "_bucket" + pre + "le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) +
               "\n";
    }
    out += name + "_bucket" + pre + "le=\"+Inf\"} " + std::to_string(count_) + "\n";
    out += name + "_sum" + plain + " " + num(sum_) + "\n" + name + "_count" + plain + " " +
           std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : e2e_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160}),
      ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20}),
      tpot_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      queue_({0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80}),
      req_prompt_({1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}),
      req_gen_({1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}) {}

void Metrics::add_waiting(int d) {
    std::lock_guard lock(mu_);
    waiting_ += d;
}

void Metrics::add_running(int d) {
    std::lock_guard lock(mu_);
    running_ += d;
}

void Metrics::record_cached(long n, long n_prompt) {
    std::lock_guard lock(mu_);
    cached_tokens_ += n;
    queried_tokens_ += n_prompt;
}

void Metrics::record_draft_passes(int passes, int seqs, double ms) {
    std::lock_guard lock(mu_);
    draft_passes_ += passes;
    draft_seqs_ += seqs;
    draft_ms_ += ms;
}

void Metrics::record_pass(int n_seqs, int n_rows, double ms, int draft_by_load) {
    std::lock_guard lock(mu_);
    ++passes_;
    pass_rows_ += n_rows;
    pass_ms_ += ms;
    last_seqs_ = n_seqs;
    last_rows_ = n_rows;
    last_draft_ = draft_by_load;
}

void Metrics::set_model_name(const std::string& name) {
    std::lock_guard lock(mu_);
    model_name_ = name;
}

void Metrics::set_kv_capacity(int n_slots, int n_ctx) {
    std::lock_guard lock(mu_);
    kv_tokens_.assign(size_t(std::max(n_slots, 0)), 0);
    kv_capacity_ = long(n_slots) * n_ctx;
}

void Metrics::set_kv_tokens(int slot, int n) {
    std::lock_guard lock(mu_);
    if (slot >= 0 && size_t(slot) < kv_tokens_.size()) kv_tokens_[size_t(slot)] = n;
}

void Metrics::record_request(const SpecStats& st, const std::string& reason, double e2e_s,
                             double ttft_s) {
    std::lock_guard lock(mu_);
    ++success_[reason];
    prompt_tokens_ += st.n_prompt;
    generation_tokens_ += st.n_generated;
    num_drafts_ += st.n_drafts;
    num_draft_tokens_ += st.n_drafted;
    num_accepted_ += st.n_accepted;
    num_forced_ += st.n_forced;
    num_forced_accepted_ += st.n_forced_accepted;
    if (accepted_per_pos_.size() < st.pos_accepted.size())
        accepted_per_pos_.resize(st.pos_accepted.size(), 0);
    for (size_t i = 0; i < st.pos_accepted.size(); ++i) accepted_per_pos_[i] += st.pos_accepted[i];
    e2e_.observe(e2e_s);
    req_prompt_.observe(st.n_prompt);
    req_gen_.observe(st.n_generated);
    if (st.n_generated > 0) ttft_.observe(ttft_s);
    if (st.n_generated > 1) tpot_.observe((e2e_s - ttft_s) / (st.n_generated - 1));
}

void Metrics::record_queue_time(double wait_s) {
    std::lock_guard lock(mu_);
    queue_.observe(wait_s);
}

void Metrics::record_failure(int status) {
    std::lock_guard lock(mu_);
    ++failure_[status];
}

// One set of metrics: vLLM's names with the model_name label, or the specula: ones.
void Metrics::render_set(std::string& out, bool vllm) const {
    const std::string P = vllm ? "vllm:" : "specula:";
    const std::string model = vllm ? "model_name=\"" + escape_label(model_name_) + "\"" : "";
    const std::string lbl = model.empty() ? "" : "{" + model + "}";
    const std::string pre = model.empty() ? "{" : "{" + model + ",";
    const std::string total = vllm ? "_total" : "";
    const auto sample = [&](const std::string& name, double v) {
        out += name + lbl + " " + num(v) + "\n";
    };
    const auto scalar = [&](const std::string& name, const char* type, const char* help, double v) {
        header(out, name, type, help);
        sample(name, v);
    };
    scalar(P + "num_requests_running", "gauge", "Requests generating in a slot.", running_);
    scalar(P + "num_requests_waiting", "gauge", "Requests queued for a free slot.", waiting_);
    header(out, P + "request_success_total", "counter",
           "Finished requests by finish reason (abort: the client disconnected).");
    for (const char* r : {"stop", "length", "abort"}) {
        auto it = success_.find(r);
        out += P + "request_success_total" + pre + "finished_reason=\"" + r + "\"} " +
               std::to_string(it == success_.end() ? 0 : it->second) + "\n";
    }
    scalar(P + "prompt_tokens_total", "counter", "Prompt tokens processed.", prompt_tokens_);
    scalar(P + "generation_tokens_total", "counter", "Tokens generated.", generation_tokens_);
    if (vllm) {
        scalar(P + "prefix_cache_queries_total", "counter",
               "Prompt tokens looked up in the prefix cache (the slots' caches).", queried_tokens_);
        scalar(P + "prefix_cache_hits_total", "counter",
               "Prompt tokens found in the prefix cache, not evaluated again.", cached_tokens_);
    }
    if (!vllm) {
        scalar(P + "prompt_tokens_cached_total", "counter",
               "Prompt tokens found in a slot's cache (prefix reuse), not evaluated again.",
               cached_tokens_);
        scalar(P + "batch_passes_total", "counter", "Batched target passes.", passes_);
        scalar(P + "batch_rows_total", "counter", "Token rows evaluated by the passes.",
               pass_rows_);
        scalar(P + "batch_pass_seconds_total", "counter", "Time in batched target passes.",
               pass_ms_ / 1e3);
        scalar(P + "batch_sequences", "gauge", "Sequences in the last pass.", last_seqs_);
        scalar(P + "batch_rows", "gauge", "Token rows of the last pass.", last_rows_);
        scalar(P + "spec_decode_draft_length_by_load", "gauge",
               "Draft length the load chose for the last pass (-1: no slot adapts).", last_draft_);
        scalar(P + "draft_batch_passes_total", "counter",
               "Draft passes (a draft model's, or the MTP head's), each over every slot still "
               "drafting.",
               draft_passes_);
        scalar(P + "draft_batch_sequences_total", "counter",
               "Sequences drafted, summed over the draft passes.", draft_seqs_);
        scalar(P + "draft_batch_seconds_total", "counter", "Time in draft passes.",
               draft_ms_ / 1e3);
        scalar(P + "spec_decode_num_forced_tokens_total", "counter",
               "Grammar-forced draft tokens proposed (also counted as draft tokens).", num_forced_);
        scalar(P + "spec_decode_num_forced_accepted_tokens_total", "counter",
               "Grammar-forced draft tokens accepted (also counted as accepted).",
               num_forced_accepted_);
    }
    scalar(P + "spec_decode_num_drafts" + total, "counter", "Target passes that verified a draft.",
           num_drafts_);
    scalar(P + "spec_decode_num_draft_tokens" + total, "counter", "Draft tokens proposed.",
           num_draft_tokens_);
    scalar(P + "spec_decode_num_accepted_tokens" + total, "counter", "Draft tokens accepted.",
           num_accepted_);
    header(out, P + "spec_decode_num_accepted_tokens_per_pos" + total, "counter",
           "Draft tokens accepted at each draft position (0-based).");
    for (size_t i = 0; i < accepted_per_pos_.size(); ++i) {
        out += P + "spec_decode_num_accepted_tokens_per_pos" + total + pre + "position=\"" +
               std::to_string(i) + "\"} " + std::to_string(accepted_per_pos_[i]) + "\n";
    }
    e2e_.render(out, P + "e2e_request_latency_seconds", "End-to-end request latency.", model);
    ttft_.render(out, P + "time_to_first_token_seconds", "Time to the first generated token.",
                 model);
    tpot_.render(out, P + "time_per_output_token_seconds",
                 "Mean time per output token after the first.", model);
    queue_.render(out, P + "request_queue_time_seconds",
                  "Time a request waited for a slot (arrival to its first scheduling).", model);
    if (!vllm) return;
    scalar(P + "spec_decode_draft_acceptance_rate", "gauge",
           "Accepted / proposed draft tokens so far (0 before any draft).",
           num_draft_tokens_ > 0 ? double(num_accepted_) / double(num_draft_tokens_) : 0.0);
    long used = 0;
    for (long n : kv_tokens_) used += n;
    double usage = kv_capacity_ > 0 ? double(used) / double(kv_capacity_) : 0.0;
    long preemptions = 0;
    if (kv_pool_) {
        const KvPoolGauges g = kv_pool_();
        if (g.capacity > 0) usage = double(g.used) / double(g.capacity);
        preemptions = g.preemptions;
    }
    scalar(P + "kv_cache_usage_perc", "gauge",
           "Fraction of the KV cache positions in use (1 = full): the slots', or the KV pool's.",
           usage);
    scalar(P + "num_preemptions_total", "counter",
           "Running requests that gave their KV back to the pool for an older one's and resumed "
           "later (only with a KV pool smaller than every slot's whole context).",
           double(preemptions));
    req_prompt_.render(out, P + "request_prompt_tokens", "Prompt tokens per request.", model);
    req_gen_.render(out, P + "request_generation_tokens", "Generated tokens per request.", model);
}

std::string Metrics::render() const {
    std::lock_guard lock(mu_);
    std::string out;
    render_set(out, /*vllm=*/true);
    render_set(out, /*vllm=*/false);
    header(out, "specula:request_failure_total", "counter", "Rejected requests by HTTP status.");
    for (const auto& [status, n] : failure_) {
        out += "specula:request_failure_total{status=\"" + std::to_string(status) + "\"} " +
               std::to_string(n) + "\n";
    }
    // One unlabelled sample with its header.
    const auto line = [&](const char* name, const char* type, const char* help, double v) {
        header(out, name, type, help);
        out += std::string(name) + " " + num(v) + "\n";
    };
    const KvPoolGauges g = kv_pool_ ? kv_pool_() : KvPoolGauges{};
    if (g.prefixes) {
        line("specula:prefix_shared_positions", "gauge",
             "KV positions of shared prompt prefixes, held once for every slot that reads them.",
             double(g.shared));
        line("specula:prefix_blocks", "gauge", "Shared prompt prefix blocks.",
             double(g.shared_blocks));
        line("specula:prefix_block_readers", "gauge",
             "Slots reading a shared prompt prefix block (running or idle).",
             double(g.shared_readers));
    }
    if (g.capacity > 0) {
        line("specula:kv_pool_positions", "gauge", "KV positions of the pool all slots share.",
             double(g.capacity));
        line("specula:kv_pool_used_positions", "gauge",
             "KV pool positions reserved by running requests.", double(g.used));
        line("specula:kv_pool_cached_positions", "gauge",
             "KV pool positions idle slots keep for their cached prefixes (evictable).",
             double(g.cached));
        line("specula:kv_pool_waiting_requests", "gauge",
             "Requests a free slot could take that wait for room in the KV pool.",
             double(g.waiting));
        line("specula:kv_pool_timeouts_total", "counter",
             "Requests that ended because the KV pool stayed full for --kv-wait-timeout.",
             double(g.timeouts));
        line("specula:kv_pool_evictions_total", "counter",
             "Idle slots whose cached prefix was dropped to make room in the KV pool.",
             double(g.evictions));
    }
    if (prompt_cache_) {
        const PromptCacheStats c = prompt_cache_->stats();
        line("specula:prompt_cache_hits_total", "counter",
             "Requests whose prompt prefix was restored from the --cache-ram pool.",
             double(c.hits));
        line("specula:prompt_cache_misses_total", "counter",
             "Requests that found no longer prefix in the --cache-ram pool.", double(c.misses));
        line("specula:prompt_cache_evictions_total", "counter",
             "Pool entries evicted (least recently used) to stay within --cache-ram.",
             double(c.evictions));
        line("specula:prompt_cache_bytes", "gauge", "Bytes the --cache-ram pool holds.",
             double(c.bytes));
        line("specula:prompt_cache_entries", "gauge", "Entries the --cache-ram pool holds.",
             double(c.entries));
        line("specula:prompt_cache_max_bytes", "gauge", "The --cache-ram bound in bytes.",
             double(c.max_bytes));
    }
    return out;
}

}  // namespace specula
