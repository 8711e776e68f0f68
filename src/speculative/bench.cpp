// run_bench / print_bench_table / write_bench_svg: see bench.h.
#include "speculative/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>

#include "common/error.h"
#include "kernels/membw.h"
#include "kernels/threadpool.h"
#include "model/model.h"
#include "speculative/generator.h"
#include "speculative/make_drafter.h"

namespace specula {

namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Median time (ms) of a `batch`-token eval on top of `ctx` tokens, over `reps` tries.
double time_eval(Session& s, const std::vector<token_id>& ctx, int batch, int reps) {
    std::vector<double> t;
    std::vector<token_id> toks(size_t(batch), ctx.back());
    s.reset();
    s.eval(ctx);
    for (int r = 0; r < reps; ++r) {
        const auto t0 = clock_type::now();
        s.eval(toks);
        t.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        s.rollback(int(ctx.size()));
    }
    return median(t);
}

struct Accum {
    long drafted = 0, accepted = 0, passes = 0, drafts = 0, reached = 0, steps = 0;
    double draft_ms = 0, verify_ms = 0;
    void add(const SpecStats& s) {
        drafted += s.n_drafted, accepted += s.n_accepted, passes += s.n_target_passes;
        drafts += s.n_drafts, steps += s.n_draft_steps;
        for (long r : s.pos_reached) reached += r;
        draft_ms += s.t_draft_ms, verify_ms += s.t_verify_ms;
    }
};

struct Config {
    std::string label;
    int n;  // 0 plain, -1 auto
};

// Median tokens/s of one pass over `n` prompt tokens (the prompt's tokens repeated), with only the
// last position's logits, as a prompt is evaluated; needs its own session for the context.
double time_prompt(const Model& m, const std::vector<token_id>& prompt, int n, int reps,
                   int n_threads) {
    Session s(m, SessionParams{n + 8, n_threads});
    std::vector<token_id> toks;
    while (int(toks.size()) < n) toks.push_back(prompt[toks.size() % prompt.size()]);
    std::vector<double> tps;
    for (int r = 0; r < reps; ++r) {
        s.reset();
        const auto t0 = clock_type::now();
        s.eval(toks, false);
        const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
        tps.push_back(sec > 0 ? n / sec : 0);
    }
    return median(tps);
}

// t1: the measured time of a one-token pass (the cost model's), reused as the b = 1 row.
void measure_throughput(BenchResult& res, const Model& target, Session& session,
                        const std::vector<token_id>& ctx, double t1) {
    const BenchParams& p = res.params;
    Throughput& tp = res.tp;
    tp.bytes_per_token = target.bytes_per_token();
    tp.tg_tps = res.rows.empty() ? 0 : res.rows[0].median_tps;
    for (int b : p.pass_sizes) {
        const double ms = b == 1 ? t1 : time_eval(session, ctx, b, 9);
        tp.passes.push_back({b, ms, t1 > 0 ? ms / t1 : 0});
    }
    if (p.pp > 0) tp.pp_tps = time_prompt(target, ctx, p.pp, std::min(p.reps, 3), p.n_threads);
    tp.n_threads = session.n_threads();
    if (p.read_test_bytes > 0) {
        ThreadPool pool(tp.n_threads);
        tp.read_gbs = measure_read_bandwidth(pool, p.read_test_bytes);
    }
}

}  // namespace

double BenchResult::model_speedup(int n) const {
    const double e = std::abs(1.0 - a) < 1e-9 ? n + 1.0 : (1.0 - std::pow(a, n + 1)) / (1.0 - a);
    return e / (n * c + 1.0 + tau_slope * n);
}

const BenchRow* BenchResult::best_fixed() const {
    const BenchRow* best = nullptr;
    for (const BenchRow& r : rows)
        if (r.n_draft > 0 && (!best || r.median_tps > best->median_tps)) best = &r;
    return best;
}

const BenchRow* BenchResult::row(const std::string& label) const {
    for (const BenchRow& r : rows)
        if (r.label == label) return &r;
    return nullptr;
}

BenchResult run_bench(const BenchParams& p) {
    if (p.prompts.empty()) fail("bench: no prompts");
    if (p.reps < 1) fail("bench: repetitions must be >= 1, got ", p.reps);
    if (p.spec && p.speculative.method == SpecMethod::none)
        fail("bench: need a draft model (-md), --lookup, or --no-spec");
    if (p.pp < 0) fail("bench: --pp must be >= 0, got ", p.pp);
    for (int b : p.pass_sizes)
        if (b < 1) fail("bench: pass sizes must be >= 1, got ", b);
    auto target = Model::load(p.target_path);
    SpeculativeSetup setup;  // method none without spec: plain decoding and throughput only
    if (p.spec) setup = load_speculative(p.speculative, *target, p.target_path);
    const auto drafter = make_drafter(setup, DrafterParams{0, p.n_threads, p.sampling});
    Session session(*target, SessionParams{0, p.n_threads});

    std::vector<std::vector<token_id>> prompts;
    for (const std::string& text : p.prompts)
        prompts.push_back(target->tokenizer().encode(text, true, true));

    std::vector<Config> configs{{"plain", 0}};
    if (p.spec) {
        for (int n : p.draft_list) configs.push_back({std::to_string(n), n});
        if (p.with_auto) configs.push_back({"auto", -1});
    }

    BenchResult res;
    res.params = p;
    res.rows.resize(configs.size());
    std::vector<Accum> acc(configs.size());
    for (size_t i = 0; i < configs.size(); ++i) {
        res.rows[i].label = configs[i].label;
        res.rows[i].n_draft = configs[i].n;
    }

    // Auto keeps what it learnt (acceptance, costs) across prompts and repetitions, as a
    // long-running process would.
    DraftLengthController learnt;
    for (int rep = 0; rep < p.reps; ++rep) {
        // Rotate the order each repetition so that no configuration always runs last.
        for (size_t k = 0; k < configs.size(); ++k) {
            const size_t ci = (k + size_t(rep)) % configs.size();
            GenParams gp;
            gp.n_predict = p.n_predict;
            gp.ignore_eos = true;  // equal work for every configuration
            gp.n_draft = std::max(configs[ci].n, 0);
            gp.synthetic_accept = p.synthetic_accept;
            long n_gen = 0;
            double ms = 0;
            for (size_t pi = 0; pi < prompts.size(); ++pi) {
                SamplingParams sp = p.sampling;
                sp.seed = p.sampling.seed + uint64_t(rep * 1000 + pi);
                Sampler sampler(sp);
                Generator gen(session, sampler, configs[ci].n == 0 ? nullptr : drafter.get(), gp,
                              configs[ci].n < 0 ? &learnt : nullptr);
                const SpecStats st = gen.generate(prompts[pi]);
                n_gen += st.n_generated;
                ms += st.t_gen_ms;
                acc[ci].add(st);
            }
            const double tps = ms > 0 ? n_gen * 1e3 / ms : 0;
            res.rows[ci].tps.push_back(tps);
            if (p.verbose)
                std::fprintf(stderr, "bench: rep %d/%d  %-5s  %.1f tok/s\n", rep + 1, p.reps,
                             configs[ci].label.c_str(), tps);
        }
    }

    long reached = 0, accepted = 0;
    for (size_t i = 0; i < configs.size(); ++i) {
        BenchRow& r = res.rows[i];
        const Accum& a = acc[i];
        r.median_tps = median(r.tps);
        r.accept = a.drafted ? double(a.accepted) / a.drafted : 0;
        r.mean_len = a.passes ? double(a.accepted + a.passes) / a.passes : 0;
        r.cond_accept = a.reached ? double(a.accepted) / a.reached : 0;
        r.draft_step_ms = a.steps ? a.draft_ms / a.steps : 0;
        r.target_pass_ms = a.passes ? a.verify_ms / a.passes : 0;
        r.mean_auto_n = a.drafts ? double(a.drafted) / a.drafts : 0;
        if (r.n_draft > 0) reached += a.reached, accepted += a.accepted;
    }
    for (BenchRow& r : res.rows)
        r.speedup = res.rows[0].median_tps > 0 ? r.median_tps / res.rows[0].median_tps : 0;

    // Cost model: target pass time against batch size, and one draft step, measured directly.
    res.a = reached ? double(accepted) / reached : 0;
    const std::vector<token_id>& ctx = prompts[0];
    const int reps = 9;
    const double t1 = time_eval(session, ctx, 1, reps);
    const int bmax = 1 + *std::max_element(p.draft_list.begin(), p.draft_list.end());
    const double tb = time_eval(session, ctx, bmax, reps);
    res.tau_slope = t1 > 0 && bmax > 1 ? std::max(0.0, (tb / t1 - 1.0) / (bmax - 1)) : 0;
    if (setup.draft_model) {
        Session ds(*setup.draft_model, SessionParams{0, p.n_threads});
        res.c = t1 > 0 ? time_eval(ds, ctx, 1, reps) / t1 : 0;
    }
    measure_throughput(res, *target, session, ctx, t1);
    return res;
}

void print_bench_table(const BenchResult& r, std::FILE* out) {
    const BenchParams& p = r.params;
    if (p.synthetic_accept >= 0)
        std::fprintf(
            out,
            "*** SYNTHETIC ACCEPTANCE %.2f: draft tokens are accepted at random, the output "
            "is NOT the target's; timing study only ***\n",
            p.synthetic_accept);
    std::fprintf(out, "target %s | draft %s | %zu prompt(s), n=%d, %d rep(s), temp %.2f\n",
                 p.target_path.c_str(),
                 p.speculative.method == SpecMethod::ngram ? "n-gram lookup"
                                                           : p.speculative.draft_model.c_str(),
                 p.prompts.size(), p.n_predict, p.reps, p.sampling.temp);
    std::fprintf(out, "| %-6s | %8s | %8s | %10s | %12s | %7s | %7s |\n", "N", "accept", "len",
                 "cond acc", "tok/s (med)", "speedup", "model");
    std::fprintf(
        out, "|--------|----------|----------|------------|--------------|---------|---------|\n");
    const int marked = p.speculative.draft_auto ? -1 : p.speculative.n_draft;
    for (const BenchRow& row : r.rows) {
        std::string label = row.label;
        if (row.n_draft == marked) label += "*";
        char model[16] = "-";
        if (row.n_draft > 0)
            std::snprintf(model, sizeof model, "%.2fx", r.model_speedup(row.n_draft));
        if (row.n_draft == 0)
            std::fprintf(out, "| %-6s | %8s | %8s | %10s | %12.1f | %6.2fx | %7s |\n",
                         label.c_str(), "-", "1.00", "-", row.median_tps, 1.0, "-");
        else
            std::fprintf(out, "| %-6s | %7.1f%% | %8.2f | %9.1f%% | %12.1f | %6.2fx | %7s |\n",
                         label.c_str(), 100 * row.accept, row.mean_len, 100 * row.cond_accept,
                         row.median_tps, row.speedup, model);
    }
    if (const BenchRow* a = r.row("auto"))
        std::fprintf(out, "auto: mean draft length %.2f\n", a->mean_auto_n);
    if (const BenchRow* b = r.best_fixed())
        std::fprintf(out, "best fixed N = %s (%.1f tok/s)\n", b->label.c_str(), b->median_tps);
    std::fprintf(out,
                 "model: a = %.3f (conditional acceptance), c = %.4f (draft step / target pass), "
                 "tau(b) = 1 + %.4f (b - 1); * = the --draft setting\n",
                 r.a, r.c, r.tau_slope);
}

void print_throughput_table(const BenchResult& r, std::FILE* out) {
    const Throughput& tp = r.tp;
    const double gb = tp.bytes_per_token / 1e9;
    auto frac = [&](double gbs) { return tp.read_gbs > 0 ? 100 * gbs / tp.read_gbs : 0; };
    std::fprintf(out,
                 "throughput: %.3f GB of weights per pass; machine streams %.1f GB/s (%d "
                 "threads)\n",
                 gb, tp.read_gbs, tp.n_threads);
    std::fprintf(out, "| %-12s | %9s | %9s | %6s | %11s | %7s |\n", "test", "tok/s", "ms/pass",
                 "tau", "weight GB/s", "of read");
    std::fprintf(out,
                 "|--------------|-----------|-----------|--------|-------------|---------|\n");
    if (tp.pp_tps > 0) {
        const double ms = 1e3 * r.params.pp / tp.pp_tps;
        // Compute-bound (the weights stream once for all its tokens): no bandwidth figure.
        std::fprintf(out, "| pp%-10d | %9.1f | %9.1f | %6s | %11s | %7s |\n", r.params.pp,
                     tp.pp_tps, ms, "-", "-", "-");
    }
    if (tp.tg_tps > 0) {
        const double gbs = gb * tp.tg_tps;
        std::fprintf(out, "| tg%-10d | %9.1f | %9.1f | %6s | %11.1f | %6.1f%% |\n",
                     r.params.n_predict, tp.tg_tps, 1e3 / tp.tg_tps, "-", gbs, frac(gbs));
    }
    for (const PassRow& pr : tp.passes) {
        const double gbs = pr.ms > 0 ? gb / (pr.ms / 1e3) : 0;
        std::fprintf(out, "| pass b=%-5d | %9.1f | %9.2f | %5.2fx | %11.1f | %6.1f%% |\n", pr.batch,
                     pr.ms > 0 ? 1e3 * pr.batch / pr.ms : 0, pr.ms, pr.tau, gbs, frac(gbs));
    }
}

void write_bench_svg(const BenchResult& r, const std::string& path) {
    std::ofstream f(path);
    if (!f) fail("cannot write plot file ", path);
    const double W = 640, H = 420, L = 60, R = 20, T = 40, B = 50;
    int nmax = 1;
    double ymax = 1.2;
    for (const BenchRow& row : r.rows)
        if (row.n_draft > 0) {
            nmax = std::max(nmax, row.n_draft);
            ymax = std::max({ymax, row.speedup * 1.1, r.model_speedup(row.n_draft) * 1.1});
        }
    auto X = [&](double n) { return L + (W - L - R) * (n - 1) / std::max(1, nmax - 1); };
    auto Y = [&](double s) { return H - B - (H - T - B) * s / ymax; };
    char buf[256];
    f << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n";
    std::snprintf(buf, sizeof buf, "speedup vs draft length%s (a=%.2f, c=%.3f)",
                  r.params.synthetic_accept >= 0 ? " [SYNTHETIC acceptance]" : "", r.a, r.c);
    f << "<text x=\"" << L << "\" y=\"20\" font-size=\"14\">" << buf << "</text>\n";
    f << "<line x1=\"" << L << "\" y1=\"" << Y(0) << "\" x2=\"" << W - R << "\" y2=\"" << Y(0)
      << "\" stroke=\"black\"/>\n<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L
      << "\" y2=\"" << Y(0) << "\" stroke=\"black\"/>\n";
    for (int n = 1; n <= nmax; ++n)
        f << "<text x=\"" << X(n) - 4 << "\" y=\"" << H - B + 18 << "\">" << n << "</text>\n";
    for (double s = 0; s <= ymax; s += 0.5) {
        std::snprintf(buf, sizeof buf, "%.1fx", s);
        f << "<text x=\"" << 20 << "\" y=\"" << Y(s) + 4 << "\">" << buf << "</text>\n";
    }
    f << "<line x1=\"" << L << "\" y1=\"" << Y(1) << "\" x2=\"" << W - R << "\" y2=\"" << Y(1)
      << "\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>\n";
    f << "<text x=\"" << (W / 2 - 30) << "\" y=\"" << H - 12 << "\">draft length N</text>\n";
    std::string measured, model;
    for (const BenchRow& row : r.rows) {
        if (row.n_draft <= 0) continue;
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(row.n_draft), Y(row.speedup));
        measured += buf;
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(row.n_draft),
                      Y(r.model_speedup(row.n_draft)));
        model += buf;
        f << "<circle cx=\"" << X(row.n_draft) << "\" cy=\"" << Y(row.speedup)
          << "\" r=\"3\" fill=\"#1f77b4\"/>\n";
    }
    f << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"" << measured
      << "\"/>\n<polyline fill=\"none\" stroke=\"#d62728\" stroke-dasharray=\"6 3\" "
         "stroke-width=\"2\" points=\""
      << model << "\"/>\n";
    if (const BenchRow* a = r.row("auto")) {
        f << "<line x1=\"" << L << "\" y1=\"" << Y(a->speedup) << "\" x2=\"" << W - R << "\" y2=\""
          << Y(a->speedup) << "\" stroke=\"#2ca02c\" stroke-dasharray=\"2 2\"/>\n";
    }
    f << "<text x=\"" << W - 250 << "\" y=\"" << T + 10
      << "\" fill=\"#1f77b4\">measured speedup (median tok/s)</text>\n"
      << "<text x=\"" << W - 250 << "\" y=\"" << T + 26
      << "\" fill=\"#d62728\">model (1-a^(N+1))/((1-a)(Nc+tau(N+1)))</text>\n"
      << "<text x=\"" << W - 250 << "\" y=\"" << T + 42 << "\" fill=\"#2ca02c\">auto</text>\n"
      << "</svg>\n";
}

}  // namespace specula
