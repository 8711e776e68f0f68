// Prometheus metrics: see metrics.h.
#include "server/metrics.h"

#include <cstdio>

namespace specula {

namespace {

std::string num(double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return buf;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void scalar(std::string& out, const std::string& name, const char* type, const char* help,
            double v) {
    header(out, name, type, help);
    out += name + " " + num(v) + "\n";
}

const std::string P = "specula:";

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

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
    header(out, name, "histogram", help.c_str());
    long cum = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cum += counts_[i];
        out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
    }
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
    out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : e2e_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160}),
      ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20}),
      tpot_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void Metrics::add_waiting(int d) {
    std::lock_guard lock(mu_);
    waiting_ += d;
}

void Metrics::add_running(int d) {
    std::lock_guard lock(mu_);
    running_ += d;
}

void Metrics::record_cached(long n) {
    std::lock_guard lock(mu_);
    cached_tokens_ += n;
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

void Metrics::record_request(const SpecStats& st, const std::string& reason, double e2e_s,
                             double ttft_s) {
    std::lock_guard lock(mu_);
    ++success_[reason];
    prompt_tokens_ += st.n_prompt;
    generation_tokens_ += st.n_generated;
    num_drafts_ += st.n_drafts;
    num_draft_tokens_ += st.n_drafted;
    num_accepted_ += st.n_accepted;
    if (accepted_per_pos_.size() < st.pos_accepted.size())
        accepted_per_pos_.resize(st.pos_accepted.size(), 0);
    for (size_t i = 0; i < st.pos_accepted.size(); ++i) accepted_per_pos_[i] += st.pos_accepted[i];
    e2e_.observe(e2e_s);
    if (st.n_generated > 0) ttft_.observe(ttft_s);
    if (st.n_generated > 1) tpot_.observe((e2e_s - ttft_s) / (st.n_generated - 1));
}

void Metrics::record_failure(int status) {
    std::lock_guard lock(mu_);
    ++failure_[status];
}

std::string Metrics::render() const {
    std::lock_guard lock(mu_);
    std::string out;
    scalar(out, P + "num_requests_running", "gauge", "Requests generating in a slot.", running_);
    scalar(out, P + "num_requests_waiting", "gauge", "Requests queued for a free slot.", waiting_);
    header(out, P + "request_success_total", "counter",
           "Finished requests by finish reason (abort: the client disconnected).");
    for (const char* r : {"stop", "length", "abort"}) {
        auto it = success_.find(r);
        out += P + "request_success_total{finished_reason=\"" + r + "\"} " +
               std::to_string(it == success_.end() ? 0 : it->second) + "\n";
    }
    header(out, P + "request_failure_total", "counter", "Rejected requests by HTTP status.");
    for (const auto& [status, n] : failure_) {
        out += P + "request_failure_total{status=\"" + std::to_string(status) + "\"} " +
               std::to_string(n) + "\n";
    }
    scalar(out, P + "prompt_tokens_total", "counter", "Prompt tokens processed.", prompt_tokens_);
    scalar(out, P + "prompt_tokens_cached_total", "counter",
           "Prompt tokens found in a slot's cache (prefix reuse), not evaluated again.",
           cached_tokens_);
    scalar(out, P + "batch_passes_total", "counter", "Batched target passes.", passes_);
    scalar(out, P + "batch_rows_total", "counter", "Token rows evaluated by the passes.",
           pass_rows_);
    scalar(out, P + "batch_pass_seconds_total", "counter", "Time in batched target passes.",
           pass_ms_ / 1e3);
    scalar(out, P + "batch_sequences", "gauge", "Sequences in the last pass.", last_seqs_);
    scalar(out, P + "batch_rows", "gauge", "Token rows of the last pass.", last_rows_);
    scalar(out, P + "spec_decode_draft_length_by_load", "gauge",
           "Draft length the load chose for the last pass (-1: no slot adapts).", last_draft_);
    scalar(out, P + "generation_tokens_total", "counter", "Tokens generated.", generation_tokens_);
    scalar(out, P + "spec_decode_num_drafts", "counter", "Target passes that verified a draft.",
           num_drafts_);
    scalar(out, P + "spec_decode_num_draft_tokens", "counter", "Draft tokens proposed.",
           num_draft_tokens_);
    scalar(out, P + "spec_decode_num_accepted_tokens", "counter", "Draft tokens accepted.",
           num_accepted_);
    header(out, P + "spec_decode_num_accepted_tokens_per_pos", "counter",
           "Draft tokens accepted at each draft position (0-based).");
    for (size_t i = 0; i < accepted_per_pos_.size(); ++i) {
        out += P + "spec_decode_num_accepted_tokens_per_pos{position=\"" + std::to_string(i) +
               "\"} " + std::to_string(accepted_per_pos_[i]) + "\n";
    }
    e2e_.render(out, P + "e2e_request_latency_seconds", "End-to-end request latency.");
    ttft_.render(out, P + "time_to_first_token_seconds", "Time to the first generated token.");
    tpot_.render(out, P + "time_per_output_token_seconds",
                 "Mean time per output token after "
                 "the first.");
    return out;
}

}  // namespace specula
