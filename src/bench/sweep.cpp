// The draft-length sweep: see sweep.h.
#include "bench/sweep.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/error.h"
#include "model/memory_plan.h"
#include "model/session.h"
#include "speculative/draft_length.h"
#include "speculative/generator.h"
#include "speculative/make_drafter.h"
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
    if (p.with_spec && p.speculative.method == SpecMethod::none)
        fail("bench: need a draft model (-md), --lookup, or --no-spec");
    if (p.pp < 0) fail("bench: --pp must be >= 0, got ", p.pp);
    if (p.depth < 0) fail("bench: --depth must be >= 0, got ", p.depth);
    for (int b : p.pass_sizes)
        if (b < 1) fail("bench: pass sizes must be >= 1, got ", b);
    const double available = mem_available_bytes();  // before the models take their share
    auto target = Model::load(
        p.target_path,
        LoadOptions{.n_threads = p.n_threads,
                    .gpu = p.gpu,
                    .mtp_sidecar = p.with_spec ? mtp_sidecar(p.speculative) : std::string()});
    SpeculativeSetup setup;  // method none without spec: plain decoding and throughput only
    if (p.with_spec) setup = load_speculative(p.speculative, *target, p.target_path);

    std::vector<std::vector<token_id>> prompts;
    for (const std::string& text : p.prompts)
        prompts.push_back(tokenize_prompt(target->tokenizer(), text));
    // At --depth every prompt follows the same filler (its BOS dropped), so the caches keep the
    // filler across generations and only the prompt itself is evaluated each time.
    const std::vector<token_id> filler = depth_filler(prompts[0], p.depth);
    if (!filler.empty()) {
        for (auto& pr : prompts) {
            std::vector<token_id> t = filler;
            t.insert(t.end(), pr.begin() + (pr.size() > 1 ? 1 : 0), pr.end());
            pr = std::move(t);
        }
    }
    // 0: the model's default context; at depth: room for the longest prompt, the generation,
    // the largest pass and the pp test on top of the filler.
    int n_ctx = 0;
    if (p.depth > 0) {
        size_t longest = 0;
        for (const auto& pr : prompts) longest = std::max(longest, pr.size());
        const int most_pass = std::max(*std::max_element(p.pass_sizes.begin(), p.pass_sizes.end()),
                                       *std::max_element(p.draft_list.begin(), p.draft_list.end()));
        n_ctx = int(longest) + std::max(p.n_predict + most_pass + 1, p.pp) + 16;
    }
    // As `run` does: the plan is printed, and refused when it does not fit, before any cache.
    const MemoryPlan plan =
        plan_memory(*target, setup.draft_model.get(),
                    CachePlan{n_ctx, p.n_threads, p.type_k, p.type_v, 1,
                              SessionParams::kDefaultUbatch, bench_logit_rows(p)},
                    available);
    std::fprintf(stderr, "bench: %s\n", describe(plan).c_str());
    check_memory(plan);
    const auto drafter =
        make_drafter(setup, DrafterParams{n_ctx, p.n_threads, p.sampling, p.type_k, p.type_v});
    Session session(*target, SessionParams{n_ctx, p.n_threads, p.type_k, p.type_v});

    std::vector<Config> configs{{"plain", 0}};
    if (p.with_spec) {
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
                const SpecStats st =
                    filler.empty() ? gen.generate(prompts[pi]) : gen.resume(prompts[pi]);
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
    // The passes are timed on top of the first prompt (at depth: filler + prompt, cached).
    const std::vector<token_id>& ctx = prompts[0];
    const int reps = 9;
    const double t1 = time_eval(session, ctx, 1, reps);
    const int bmax = 1 + *std::max_element(p.draft_list.begin(), p.draft_list.end());
    const double tb = time_eval(session, ctx, bmax, reps);
    res.tau_slope = t1 > 0 && bmax > 1 ? std::max(0.0, (tb / t1 - 1.0) / (bmax - 1)) : 0;
    if (setup.draft_model) {
        Session ds(*setup.draft_model, SessionParams{n_ctx, p.n_threads, p.type_k, p.type_v});
        res.c = t1 > 0 ? time_eval(ds, ctx, 1, reps) / t1 : 0;
    } else if (t1 > 0) {  // a drafter without a model of its own (MTP head, n-gram): its steps
        double ms = 0;
        long steps = 0;
        for (size_t i = 1; i < configs.size(); ++i) {
            ms += acc[i].draft_ms;
            steps += acc[i].steps;
        }
        res.c = steps ? ms / steps / t1 : 0;
    }
    ThroughputParams tq;
    tq.pp = p.pp;
    tq.depth = p.depth;
    tq.pp_reps = std::min(p.reps, 3);
    tq.pass_sizes = p.pass_sizes;
    tq.read_test_bytes = p.read_test_bytes;
    tq.n_threads = p.n_threads;
    tq.type_k = p.type_k;
    tq.type_v = p.type_v;
    res.tp = measure_throughput(tq, *target, session, ctx, t1, p.n_predict, res.rows[0].median_tps);
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
                 : p.speculative.method == SpecMethod::mtp
                     ? (p.speculative.draft_model.empty()
                            ? "the model's MTP head"
                            : ("MTP head of " + p.speculative.draft_model).c_str())
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
