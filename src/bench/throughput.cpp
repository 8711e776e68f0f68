// The throughput tests: see throughput.h.
#include "bench/throughput.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "common/clock.h"

namespace specula {

namespace {

std::string fmt_gb(int64_t bytes) {
    char b[32];
    std::snprintf(b, sizeof(b), "%.3f GB", double(bytes) / 1e9);
    return b;
}

// Brings s to exactly the tokens ctx: keeps the common prefix it caches, evaluates the rest.
void load_context(Session& s, const std::vector<token_id>& ctx) {
    const int keep = s.common_prefix(ctx);
    s.rollback(keep);
    if (keep < int(ctx.size())) s.eval(std::span<const token_id>(ctx).subspan(size_t(keep)), false);
}

// The tokens of a timed `batch`-token pass: distinct ones, as a draft's are (a MoE routes them to
// different experts; one token repeated would read the experts of one token only).
std::vector<token_id> pass_tokens(const std::vector<token_id>& ctx, int batch) {
    std::vector<token_id> toks;
    for (int i = 0; i < batch; ++i) toks.push_back(ctx[size_t(i) % ctx.size()]);
    return toks;
}

// Median tokens/s of one pass over `n` prompt tokens (the prompt's tokens repeated), with only the
// last position's logits, as a prompt is evaluated; at depth on top of the first `depth` tokens
// of ctx (evaluated once). Needs its own session for the context.
double time_prompt(const Model& m, const std::vector<token_id>& ctx, int n, int reps,
                   const ThroughputParams& p) {
    const int depth = std::min<int>(p.depth, int(ctx.size()));
    SessionParams sp{depth + n + 8, p.n_threads, p.type_k, p.type_v};
    sp.n_ubatch = p.n_ubatch;
    Session s(m, sp);
    const std::vector<token_id> filler(ctx.begin(), ctx.begin() + depth);
    std::vector<token_id> toks;
    while (int(toks.size()) < n) toks.push_back(ctx[toks.size() % ctx.size()]);
    std::vector<double> tps;
    for (int r = 0; r < reps; ++r) {
        load_context(s, filler);
        const auto t0 = clock_type::now();
        s.eval(toks, false);
        const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
        tps.push_back(sec > 0 ? n / sec : 0);
    }
    return median(tps);
}

// Pass + rollback rows of a hybrid model (RollbackRow), on top of ctx.
std::vector<RollbackRow> time_rollbacks(const Model& m, Session& s,
                                        const std::vector<token_id>& ctx, int batch, int reps) {
    const std::vector<token_id> toks = pass_tokens(ctx, batch);
    const int n0 = int(ctx.size());
    SessionParams bp{n0 + batch + 8, s.n_threads()};
    bp.recurrent_rollback = false;
    Session base(m, bp);
    std::vector<double> tb;
    for (int r = 0; r < reps; ++r) {
        base.rollback(0);  // without rollback support: back to 0, then the context again
        base.eval(ctx, false);
        const auto t0 = clock_type::now();
        base.eval(toks);
        tb.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
    }
    const double base_ms = median(tb);
    std::vector<RollbackRow> rows;
    for (int keep : {1, batch - 1}) {
        load_context(s, ctx);
        std::vector<double> t;
        for (int r = 0; r < reps; ++r) {
            const auto t0 = clock_type::now();
            s.eval(toks);
            s.rollback(n0 + keep);
            t.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
            s.rollback(n0);
        }
        const double ms = median(t);
        rows.push_back({batch, keep, ms, base_ms, base_ms > 0 ? ms / base_ms : 0});
    }
    return rows;
}

// The KV bytes a 1-token pass at `depth` reads: each layer's rows its query sees (all `depth`, or
// a sliding window's; none in a recurrent layer), K and V rows in the cache's types.
int64_t kv_read_bytes(const Model& m, int depth, KVType k, KVType v) {
    const HParams& hp = m.hparams();
    const int64_t row = int64_t(kv_row_bytes(k, hp.n_embd_kv()) + kv_row_bytes(v, hp.n_embd_kv()));
    int64_t rows = 0;
    for (int il = 0; il < hp.n_layer && depth > 0; ++il) {
        if (hp.is_recurrent(il)) continue;
        rows += hp.window(il) > 0 ? std::min(depth, hp.window(il)) : depth;
    }
    return rows * row;
}

// The PassRows of `sizes`: `reps` rounds of one pass per size in turn, so that a machine whose
// speed drifts (a shared VM's does, by 2x over seconds) weighs on every size alike. tau is the
// median over the rounds of each pass's time over the same round's 1-token pass (paired, not a
// ratio of medians taken at different times); without 1 among the sizes, over t1.
std::vector<PassRow> time_passes(Session& s, const std::vector<token_id>& ctx,
                                 const std::vector<int>& sizes, double t1, int reps) {
    std::vector<std::vector<double>> ms(sizes.size()), tau(sizes.size());
    std::vector<std::vector<token_id>> toks;
    for (int b : sizes) toks.push_back(pass_tokens(ctx, b));
    load_context(s, ctx);
    const auto one = std::find(sizes.begin(), sizes.end(), 1);
    for (int r = 0; r < reps; ++r) {
        std::vector<double> round;
        for (const std::vector<token_id>& t : toks) {
            const auto t0 = clock_type::now();
            s.eval(t);
            round.push_back(
                std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
            s.rollback(int(ctx.size()));
        }
        const double base = one != sizes.end() ? round[size_t(one - sizes.begin())] : t1;
        for (size_t i = 0; i < sizes.size(); ++i) {
            ms[i].push_back(round[i]);
            if (base > 0) tau[i].push_back(round[i] / base);
        }
    }
    std::vector<PassRow> rows;
    for (size_t i = 0; i < sizes.size(); ++i) {
        rows.push_back({sizes[i], median(ms[i]), tau[i].empty() ? 0 : median(tau[i])});
    }
    return rows;
}

}  // namespace

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double time_eval(Session& s, const std::vector<token_id>& ctx, int batch, int reps) {
    std::vector<double> t;
    const std::vector<token_id> toks = pass_tokens(ctx, batch);
    load_context(s, ctx);
    for (int r = 0; r < reps; ++r) {
        const auto t0 = clock_type::now();
        s.eval(toks);
        t.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        s.rollback(int(ctx.size()));
    }
    return median(t);
}

Throughput measure_throughput(const ThroughputParams& p, const Model& target, Session& session,
                              const std::vector<token_id>& ctx, double t1, int tg, double tg_tps) {
    Throughput tp;
    tp.bytes_per_token = target.bytes_per_token();
    tp.kv_bytes = kv_read_bytes(target, p.depth, p.type_k, p.type_v);
    tp.tg = tg;
    tp.tg_tps = tg_tps;
    tp.passes = time_passes(session, ctx, p.pass_sizes, t1, 9);
    const auto& rec = target.hparams().recurrent_layers;
    if (!p.pass_sizes.empty() && std::find(rec.begin(), rec.end(), 1) != rec.end()) {
        const int b = *std::max_element(p.pass_sizes.begin(), p.pass_sizes.end());
        if (b > 1) tp.rollbacks = time_rollbacks(target, session, ctx, b, 9);
    }
    tp.pp = p.pp;
    tp.depth = p.depth;
    if (p.pp > 0) tp.pp_tps = time_prompt(target, ctx, p.pp, p.pp_reps, p);
    tp.n_threads = session.n_threads();
    tp.read_gbs = p.read_gbs;
    return tp;
}

void print_throughput_table(const Throughput& tp, std::FILE* out) {
    const double gb = double(tp.bytes_per_token + tp.kv_bytes) / 1e9;
    auto frac = [&](double gbs) { return tp.read_gbs > 0 ? 100 * gbs / tp.read_gbs : 0; };
    const std::string kv =
        tp.depth > 0 ? " + " + fmt_gb(tp.kv_bytes) + " of KV at depth " + std::to_string(tp.depth)
                     : "";
    std::fprintf(out,
                 "throughput: %.3f GB of weights%s per pass; machine streams %.1f GB/s (%d "
                 "threads)\n",
                 tp.bytes_per_token / 1e9, kv.c_str(), tp.read_gbs, tp.n_threads);
    std::fprintf(out, "| %-12s | %9s | %9s | %6s | %11s | %7s |\n", "test", "tok/s", "ms/pass",
                 "tau", "read GB/s", "of read");
    std::fprintf(out,
                 "|--------------|-----------|-----------|--------|-------------|---------|\n");
    if (tp.pp_tps > 0) {
        const double ms = 1e3 * tp.pp / tp.pp_tps;
        // Compute-bound (the weights stream once for all its tokens): no bandwidth figure.
        std::fprintf(out, "| pp%-10d | %9.1f | %9.1f | %6s | %11s | %7s |\n", tp.pp, tp.pp_tps, ms,
                     "-", "-", "-");
    }
    if (tp.tg_tps > 0) {
        const double gbs = gb * tp.tg_tps;
        std::fprintf(out, "| tg%-10d | %9.1f | %9.1f | %6s | %11.1f | %6.1f%% |\n", tp.tg,
                     tp.tg_tps, 1e3 / tp.tg_tps, "-", gbs, frac(gbs));
    }
    for (const PassRow& pr : tp.passes) {
        const double gbs = pr.ms > 0 ? gb / (pr.ms / 1e3) : 0;
        std::fprintf(out, "| pass b=%-5d | %9.1f | %9.2f | %5.2fx | %11.1f | %6.1f%% |\n", pr.batch,
                     pr.ms > 0 ? 1e3 * pr.batch / pr.ms : 0, pr.ms, pr.tau, gbs, frac(gbs));
    }
    for (const RollbackRow& rr : tp.rollbacks) {
        std::fprintf(out,
                     "recurrent rollback: pass b=%d keeping %d of %d: %.2f ms, %.2fx the same pass "
                     "without rollback support (%.2f ms)\n",
                     rr.batch, rr.keep, rr.batch, rr.ms, rr.ratio, rr.base_ms);
    }
}

}  // namespace specula
