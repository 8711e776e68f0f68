// run_serve_load: see serve_load.h.
#include "bench/serve_load.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/clock.h"
#include "common/error.h"

namespace specula {

namespace {

using json = nlohmann::json;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// Distinct story openings: client c's request r uses kPrompts[(c + r * clients) % size].
const char* const kPrompts[] = {
    "Once upon a time, there was a little girl named Lily. She loved to",
    "Tom and his dog went to the park. The sun was",
    "One day, a big bear found a red ball in the forest. He",
    "Sue had a small garden with many flowers. Every morning she",
    "There was a boy who liked to build towers with blocks. One day",
    "A little bird lived in a tall tree near the river. The bird",
    "Mom baked a cake for Ben's birthday. When Ben saw it, he",
    "The cat and the mouse were friends. They liked to play",
    "Anna found a shiny key under her bed. She wondered",
    "Max wanted to fly like a plane. He made wings out of",
    "It was a rainy day and Tim could not go outside. So he",
    "A tiny fish swam in the big blue sea. One day it met",
    "Grandpa told Lucy a story about a magic tree that",
    "The little car was sad because it was old. Then a kind man",
    "Sam and Mia wanted to make a snowman. They rolled",
    "In a small town, there lived a friendly dragon who",
};
constexpr int kNumPrompts = sizeof(kPrompts) / sizeof(kPrompts[0]);

struct RequestResult {
    bool ok = false;
    std::string error;
    long tokens = 0;
    double ttft_ms = 0;
    std::vector<double> itl_ms;  // one per token after the first chunk
    double tpot_ms = -1;         // (last - first chunk) / (tokens after the first chunk)
};

// Takes complete SSE events from `buf`, calling on_data with each `data:` payload.
template <class F>
void drain_events(std::string& buf, F&& on_data) {
    for (size_t end; (end = buf.find("\n\n")) != std::string::npos;) {
        const std::string ev = buf.substr(0, end);
        buf.erase(0, end + 2);
        size_t pos = 0;
        while (pos < ev.size()) {
            size_t nl = ev.find('\n', pos);
            if (nl == std::string::npos) nl = ev.size();
            const std::string line = ev.substr(pos, nl - pos);
            if (line.rfind("data:", 0) == 0) {
                size_t s = 5;
                while (s < line.size() && line[s] == ' ') ++s;
                on_data(line.substr(s));
            }
            pos = nl + 1;
        }
    }
}

RequestResult one_request(httplib::Client& cli, const ServeLoadParams& p,
                          const std::string& prompt) {
    RequestResult r;
    json body = {{"prompt", prompt},
                 {"max_tokens", p.max_tokens},
                 {"temperature", 0},
                 {"stream", true},
                 {"ignore_eos", true}};
    if (!p.model.empty()) body["model"] = p.model;
    if (p.n_draft >= 0) body["speculative"] = {{"num_speculative_tokens", p.n_draft}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
    std::string buf;
    long usage_tokens = -1, chunk_tokens = 0;
    bool done = false, first = true;
    const auto t0 = clock_type::now();
    auto last = t0;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        buf.append(data, n);
        drain_events(buf, [&](const std::string& payload) {
            if (payload == "[DONE]") {
                done = true;
                return;
            }
            const json j = json::parse(payload, nullptr, false);
            if (j.is_discarded() || !j.is_object()) return;
            if (j.contains("error")) {
                r.error = j["error"].dump();
                return;
            }
            if (j.contains("usage") && j["usage"].is_object() &&
                j["usage"].contains("completion_tokens"))
                usage_tokens = j["usage"]["completion_tokens"].get<long>();
            if (!j.contains("choices") || j["choices"].empty()) return;
            const json& c = j["choices"][0];
            std::string text;
            if (c.contains("text") && c["text"].is_string()) text = c["text"];
            if (c.contains("delta") && c["delta"].contains("content") &&
                c["delta"]["content"].is_string())
                text = c["delta"]["content"];
            if (text.empty()) return;
            long k = 1;
            if (c.contains("specula") && c["specula"].contains("tokens"))
                k = std::max<long>(1, long(c["specula"]["tokens"].size()));
            const auto now = clock_type::now();
            if (first) {
                r.ttft_ms = ms_between(t0, now);
                first = false;
            } else {
                const double gap = ms_between(last, now) / double(k);
                for (long i = 0; i < k; ++i) r.itl_ms.push_back(gap);
            }
            last = now;
            chunk_tokens += k;
        });
        return true;
    };
    const httplib::Result res = cli.send(req);
    if (!res) {
        r.error = "connection failed: " + httplib::to_string(res.error());
        return r;
    }
    if (res->status != 200) {
        r.error = "HTTP " + std::to_string(res->status) + ": " + buf.substr(0, 200);
        return r;
    }
    if (!r.error.empty()) return r;
    if (!done) {
        r.error = "the stream ended without [DONE]";
        return r;
    }
    r.tokens = usage_tokens >= 0 ? usage_tokens : chunk_tokens;
    if (!r.itl_ms.empty()) {
        double sum = 0;
        for (double x : r.itl_ms) sum += x;
        r.tpot_ms = sum / double(r.itl_ms.size());
    }
    r.ok = true;
    return r;
}

}  // namespace

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t rank = size_t(std::ceil(q * double(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

ServeLoadResult run_serve_load(const ServeLoadParams& p) {
    if (p.clients < 1) fail("bench-serve: clients must be >= 1, got ", p.clients);
    if (p.requests_per_client < 1)
        fail("bench-serve: requests per client must be >= 1, got ", p.requests_per_client);
    if (p.max_tokens < 1) fail("bench-serve: -n must be >= 1, got ", p.max_tokens);
    if (p.url.rfind("http://", 0) != 0)
        fail("bench-serve: --url must start with http:// (no TLS), got '", p.url, "'");
    std::vector<RequestResult> all;
    std::mutex mu;
    const auto t0 = clock_type::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < p.clients; ++c) {
        threads.emplace_back([&, c] {
            httplib::Client cli(p.url);
            cli.set_read_timeout(p.timeout_s, 0);
            cli.set_write_timeout(p.timeout_s, 0);
            cli.set_connection_timeout(10, 0);
            for (int r = 0; r < p.requests_per_client; ++r) {
                const std::string prompt = kPrompts[(c + r * p.clients) % kNumPrompts];
                RequestResult res = one_request(cli, p, prompt);
                std::lock_guard lock(mu);
                all.push_back(std::move(res));
            }
        });
    }
    for (auto& t : threads) t.join();
    ServeLoadResult out;
    out.clients = p.clients;
    out.wall_s = ms_between(t0, clock_type::now()) / 1e3;
    std::vector<double> ttft, itl, tpot;
    for (const RequestResult& r : all) {
        ++out.requests;
        if (!r.ok) {
            ++out.failed;
            if (out.first_error.empty()) out.first_error = r.error;
            continue;
        }
        out.tokens += r.tokens;
        ttft.push_back(r.ttft_ms);
        itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
        if (r.tpot_ms >= 0) tpot.push_back(r.tpot_ms);
    }
    out.agg_tps = out.wall_s > 0 ? double(out.tokens) / out.wall_s : 0;
    out.ttft_p50_ms = percentile(ttft, 0.5);
    out.ttft_p99_ms = percentile(ttft, 0.99);
    out.itl_p50_ms = percentile(itl, 0.5);
    out.itl_p99_ms = percentile(itl, 0.99);
    out.tpot_p50_ms = percentile(tpot, 0.5);
    out.tpot_p99_ms = percentile(tpot, 0.99);
    return out;
}

std::string serve_load_table(const std::vector<ServeLoadResult>& rows, const std::string& label) {
    std::string s =
        "| server | clients | requests | failed | tokens | wall s | agg tok/s | "
        "TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | TPOT p50 ms | TPOT p99 ms |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    char buf[512];
    for (const ServeLoadResult& r : rows) {
        std::snprintf(
            buf, sizeof buf,
            "| %s | %d | %d | %d | %ld | %.1f | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
            label.c_str(), r.clients, r.requests, r.failed, r.tokens, r.wall_s, r.agg_tps,
            r.ttft_p50_ms, r.ttft_p99_ms, r.itl_p50_ms, r.itl_p99_ms, r.tpot_p50_ms, r.tpot_p99_ms);
        s += buf;
    }
    return s;
}

void write_serve_load_svg(
    const std::vector<std::pair<std::string, std::vector<ServeLoadResult>>>& runs,
    const std::string& path) {
    std::ofstream f(path);
    if (!f) fail("cannot write plot file ", path);
    const double W = 640, H = 420, L = 60, R = 140, T = 40, B = 50;
    int cmax = 1;
    double ymax = 1;
    for (const auto& [name, rows] : runs)
        for (const ServeLoadResult& r : rows) {
            cmax = std::max(cmax, r.clients);
            ymax = std::max(ymax, r.agg_tps * 1.1);
        }
    auto X = [&](double c) {
        return L + (W - L - R) * std::log2(c) / std::max(1.0, std::log2(double(cmax)));
    };
    auto Y = [&](double v) { return H - B - (H - T - B) * v / ymax; };
    f << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n<text x=\""
      << L
      << "\" y=\"20\" font-size=\"14\">aggregate generation tok/s vs concurrent clients</text>\n";
    f << "<line x1=\"" << L << "\" y1=\"" << Y(0) << "\" x2=\"" << W - R << "\" y2=\"" << Y(0)
      << "\" stroke=\"black\"/>\n<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L
      << "\" y2=\"" << Y(0) << "\" stroke=\"black\"/>\n";
    for (int c = 1; c <= cmax; c *= 2)
        f << "<text x=\"" << X(c) - 4 << "\" y=\"" << H - B + 18 << "\">" << c << "</text>\n";
    char buf[128];
    for (int i = 0; i <= 4; ++i) {
        std::snprintf(buf, sizeof buf, "%.1f", ymax * i / 4);
        f << "<text x=\"10\" y=\"" << Y(ymax * i / 4) + 4 << "\">" << buf << "</text>\n";
    }
    f << "<text x=\"" << (W - R) / 2 << "\" y=\"" << H - 12 << "\">clients</text>\n";
    const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
    for (size_t k = 0; k < runs.size(); ++k) {
        const char* col = colors[k % 5];
        std::string pts;
        for (const ServeLoadResult& r : runs[k].second) {
            std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(r.clients), Y(r.agg_tps));
            pts += buf;
            f << "<circle cx=\"" << X(r.clients) << "\" cy=\"" << Y(r.agg_tps)
              << "\" r=\"3\" fill=\"" << col << "\"/>\n";
        }
        f << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"2\" points=\"" << pts
          << "\"/>\n<text x=\"" << W - R + 10 << "\" y=\"" << T + 20 * double(k) << "\" fill=\""
          << col << "\">" << runs[k].first << "</text>\n";
    }
    f << "</svg>\n";
}

}  // namespace specula
