// The draft-length sweep: see sweep.h.
#include "bench/sweep.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "bench/membw.h"
#include "common/error.h"
#include "common/threadpool.h"
#include "model/session.h"
#include "speculative/draft_length/draft_length.h"
#include "speculative/generator.h"
#include "tokenizer/prompt.h"

namespace specula {

namespace {

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

// The filler before every prompt at --depth: the first prompt's tokens (after its BOS) repeated
// to `depth` tokens, behind the first prompt's first token.
std::vector<token_id> depth_filler(const std::vector<token_id>& first, int depth) {
    std::vector<token_id> out;
    if (depth <= 0 || first.empty()) return out;
    out.push_back(first[0]);
    const size_t from = first.size() > 1 ? 1 : 0;
    for (size_t i = from; int(out.size()) < depth; i = i + 1 < first.size() ? i + 1 : from)
        out.push_back(first[i]);
    return out;
}

// The most logits rows one bench pass keeps: a verify of the longest draft (the adaptive
// length's bound too) or a timed pass over the most tokens.
int bench_logit_rows(const BenchParams& p) {
    int rows = DraftLengthParams{}.n_max + 1;
    for (int n : p.draft_list) rows = std::max(rows, n + 1);
    for (int n : p.pass_sizes) rows = std::max(rows, n);
    return rows;
}

void check_bench_params(const BenchParams& p) {
    if (p.prompts.empty()) fail("bench: no prompts");
    if (p.reps < 1) fail("bench: repetitions must be >= 1, got ", p.reps);
    if (p.with_spec && p.runtime.speculative.method == SpecMethod::none)
        fail("bench: need a draft model (-md), --lookup, or --no-spec");
    if (p.pp < 0) fail("bench: --pp must be >= 0, got ", p.pp);
    if (p.depth < 0) fail("bench: --depth must be >= 0, got ", p.depth);
    for (int b : p.pass_sizes)
        if (b < 1) fail("bench: pass sizes must be >= 1, got ", b);
}

// The prompts' tokens; at --depth every prompt follows the same filler (its BOS dropped), so the
// caches keep the filler across generations and only the prompt itself is evaluated each time.
struct BenchPrompts {
    std::vector<std::vector<token_id>> tokens;
    std::vector<token_id> filler;
};

BenchPrompts bench_prompts(const BenchParams& p, const Tokenizer& tok) {
    BenchPrompts b;
    for (const std::string& text : p.prompts) b.tokens.push_back(tokenize_prompt(tok, text));
    b.filler = depth_filler(b.tokens[0], p.depth);
    if (!b.filler.empty()) {
        for (auto& pr : b.tokens) {
            std::vector<token_id> t = b.filler;
            t.insert(t.end(), pr.begin() + (pr.size() > 1 ? 1 : 0), pr.end());
            pr = std::move(t);
        }
    }
    return b;
}

// At --depth: room for the longest prompt, the generation, the largest pass and the pp test on
// top of the filler (-c, when given, must hold it).
int depth_context(const BenchParams& p, const BenchPrompts& b, int given) {
    size_t longest = 0;
    for (const auto& pr : b.tokens) longest = std::max(longest, pr.size());
    const int most_pass = std::max(*std::max_element(p.pass_sizes.begin(), p.pass_sizes.end()),
                                   *std::max_element(p.draft_list.begin(), p.draft_list.end()));
    const int need = int(longest) + std::max(p.n_predict + most_pass + 1, p.pp) + 16;
    if (given == RuntimeOptions::kCtxDefault) return need;
    if (given > 0 && given < need)
        fail("bench: -c ", given, " is smaller than --depth ", p.depth, " needs (", need, ")");
    return 0;  // keep the context the -c rule gave
}

// The sweep's configurations: plain, each fixed draft length, auto.
std::vector<Config> bench_configs(const BenchParams& p) {
    std::vector<Config> configs{{"plain", 0}};
    if (p.with_spec) {
        for (int n : p.draft_list) configs.push_back({std::to_string(n), n});
        if (p.with_auto) configs.push_back({"auto", -1});
    }
    return configs;
}

// Every repetition of every configuration over every prompt (configurations interleaved, the
// order rotated each repetition so that no configuration always runs last): tok/s per
// repetition into the rows, the statistics into acc.
void run_sweep(const BenchParams& p, Runtime& rt, const BenchPrompts& prompts,
               const std::vector<Config>& configs, BenchResult& res, std::vector<Accum>& acc) {
    // Auto keeps what it learnt (acceptance, costs) across prompts and repetitions, as a
    // long-running process would.
    DraftLengthController learnt;
    for (int rep = 0; rep < p.reps; ++rep) {
        for (size_t k = 0; k < configs.size(); ++k) {
            const size_t ci = (k + size_t(rep)) % configs.size();
            // Equal work for every configuration (ignore_eos); --draft-min and the forced
            // drafts as every command has them.
            GenParams gp =
                gen_params(rt, p.n_predict, /*ignore_eos=*/true, std::max(configs[ci].n, 0));
            gp.synthetic_accept = p.synthetic_accept;
            long n_gen = 0;
            double ms = 0;
            for (size_t pi = 0; pi < prompts.tokens.size(); ++pi) {
                SamplingParams sp = p.sampling;
                sp.seed = p.sampling.seed + uint64_t(rep * 1000 + pi);
                Sampler sampler(sp);
                Generator gen(*rt.session, sampler, configs[ci].n == 0 ? nullptr : rt.drafter.get(),
                              gp, configs[ci].n < 0 ? &learnt : nullptr);
                const SpecStats st = prompts.filler.empty() ? gen.generate(prompts.tokens[pi])
                                                            : gen.resume(prompts.tokens[pi]);
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
}

// The rows' figures from the accumulated statistics; the fitted acceptance.
void summarize(BenchResult& res, const std::vector<Accum>& acc) {
    long reached = 0, accepted = 0;
    for (size_t i = 0; i < res.rows.size(); ++i) {
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
    res.a = reached ? double(accepted) / reached : 0;
}

// Cost model: target pass time against batch size, and one draft step, measured directly on
// top of `ctx`; returns the one-token pass's time.
double fit_costs(const BenchParams& p, Runtime& rt, const std::vector<token_id>& ctx,
                 const std::vector<Accum>& acc, BenchResult& res) {
    const int reps = 9;
    const double t1 = time_eval(*rt.session, ctx, 1, reps);
    const int bmax = 1 + *std::max_element(p.draft_list.begin(), p.draft_list.end());
    const double tb = time_eval(*rt.session, ctx, bmax, reps);
    res.tau_slope = t1 > 0 && bmax > 1 ? std::max(0.0, (tb / t1 - 1.0) / (bmax - 1)) : 0;
    if (const Model* draft = rt.speculative.draft_model.get()) {
        Session ds(*draft, session_params(rt));
        res.c = t1 > 0 ? time_eval(ds, ctx, 1, reps) / t1 : 0;
    } else if (t1 > 0) {  // a drafter without a model of its own (MTP head, n-gram): its steps
        double ms = 0;
        long steps = 0;
        for (size_t i = 1; i < acc.size(); ++i) {
            ms += acc[i].draft_ms;
            steps += acc[i].steps;
        }
        res.c = steps ? ms / steps / t1 : 0;
    }
    return t1;
}

}  // namespace

RuntimeOptions bench_runtime_options() {
    RuntimeOptions o;
    o.n_ctx = RuntimeOptions::kCtxDefault;
    o.log_prefix = "bench: ";
    return o;
}

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
    check_bench_params(p);
    RuntimeOptions ro = p.runtime;
    if (!p.with_spec) ro.speculative.method = SpecMethod::none;  // plain and throughput only
    ro.sampling = p.sampling;
    ro.logit_rows = bench_logit_rows(p);
    // The bandwidth test first: its buffer (512 MiB by default, far larger than the caches) is
    // freed before the model loads, so it never adds to the run's peak resident memory (it did:
    // +512 MiB over the memory plan in every bench, the RSS figure compared with other engines).
    double read_gbs = 0;
    if (p.read_test_bytes > 0) {
        ThreadPool pool(default_threads(p.runtime.n_threads));
        read_gbs = measure_read_bandwidth(pool, p.read_test_bytes);
    }
    BenchPrompts prompts;
    ro.before_caches = [&](Runtime& rt) {
        prompts = bench_prompts(p, rt.target->tokenizer());
        if (p.depth > 0)
            if (const int n = depth_context(p, prompts, p.runtime.n_ctx)) rt.n_ctx = n;
    };
    Runtime rt = open_runtime(ro);  // the plan is printed, and refused when it does not fit

    const std::vector<Config> configs = bench_configs(p);
    BenchResult res;
    res.params = p;
    res.rows.resize(configs.size());
    for (size_t i = 0; i < configs.size(); ++i) {
        res.rows[i].label = configs[i].label;
        res.rows[i].n_draft = configs[i].n;
    }
    std::vector<Accum> acc(configs.size());
    run_sweep(p, rt, prompts, configs, res, acc);
    summarize(res, acc);
    // The passes are timed on top of the first prompt (at depth: filler + prompt, cached).
    const std::vector<token_id>& ctx = prompts.tokens[0];
    const double t1 = fit_costs(p, rt, ctx, acc, res);
    ThroughputParams tq;
    tq.pp = p.pp;
    tq.depth = p.depth;
    tq.pp_reps = std::min(p.reps, 3);
    tq.pass_sizes = p.pass_sizes;
    tq.read_gbs = read_gbs;
    tq.n_threads = p.runtime.n_threads;
    tq.n_ubatch = rt.n_ubatch;
    tq.type_k = rt.type_k;
    tq.type_v = rt.type_v;
    res.tp = measure_throughput(tq, *rt.target, *rt.session, ctx, t1, p.n_predict,
                                res.rows[0].median_tps);
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
                 p.runtime.model_path.c_str(),
                 p.runtime.speculative.method == SpecMethod::ngram ? "n-gram lookup"
                 : p.runtime.speculative.method == SpecMethod::mtp
                     ? (p.runtime.speculative.draft_model.empty()
                            ? "the model's MTP head"
                            : ("MTP head of " + p.runtime.speculative.draft_model).c_str())
                     : p.runtime.speculative.draft_model.c_str(),
                 p.prompts.size(), p.n_predict, p.reps, p.sampling.temp);
    std::fprintf(out, "| %-6s | %8s | %8s | %10s | %12s | %7s | %7s |\n", "N", "accept", "len",
                 "cond acc", "tok/s (med)", "speedup", "model");
    std::fprintf(
        out, "|--------|----------|----------|------------|--------------|---------|---------|\n");
    const int marked = p.runtime.speculative.draft_auto ? -1 : p.runtime.speculative.n_draft;
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
    if (const BenchRow* b = r.best_fixed()) {
        std::fprintf(out, "best fixed N = %s (%.1f tok/s)\n", b->label.c_str(), b->median_tps);
        const BenchRow* a = r.row("auto");
        if (b->speedup > 0 && b->speedup <= 1.0 && (!a || a->speedup <= 1.0))
            std::fprintf(out,
                         "no draft length beats plain decoding here (best: N = %s at %.2fx): "
                         "decode without a drafter, or use a cheaper draft model\n",
                         b->label.c_str(), b->speedup);
    }
    std::fprintf(out,
                 "model: a = %.3f (conditional acceptance), c = %.4f (draft step / target pass), "
                 "tau(b) = 1 + %.4f (b - 1); * = the --draft setting\n",
                 r.a, r.c, r.tau_slope);
}

}  // namespace specula
