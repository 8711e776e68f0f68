// EAGLE-3 head microbenchmarks: a target (SPECULA_BENCH_MODEL) and a head fitted to it
// (SPECULA_BENCH_HEAD, e.g. scripts/models/eagle3_head.py --bench TARGET HEAD.gguf --type q8_0):
// one chained head step (one row on top of a 64-position head cache, truncated back after each
// step), the first pass of a proposal (fc over the target's captured rows of a 4-token verify,
// then those 4 rows), and one target pass over one token at the same depth, capturing the
// head's layers. The cost of a draft token relative to a target pass is the ratio.
//   SPECULA_BENCH_MODEL=models/w-d2048-f5632-l20-Q8_0.gguf SPECULA_BENCH_HEAD=/tmp/head.gguf \
//       build/bin/bench_eagle3
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "model/load/model.h"
#include "model/session.h"
#include "speculative/drafters/eagle3_head.h"

namespace {

using namespace specula;

constexpr int kCtx = 64;

struct Fixture {
    std::unique_ptr<Model> model;
    std::unique_ptr<Eagle3Head> head;
    std::unique_ptr<Session> session;
    std::unique_ptr<Eagle3State> st;
    std::vector<token_id> ctx;
    std::vector<float> feat, g;
};

Fixture* fixture(benchmark::State& state, int threads) {
    static std::unique_ptr<Fixture> f;
    static int f_threads = 0;
    const char* path = std::getenv("SPECULA_BENCH_MODEL");
    const char* head = std::getenv("SPECULA_BENCH_HEAD");
    if (!path || !head) {
        state.SkipWithError("set SPECULA_BENCH_MODEL (the target) and SPECULA_BENCH_HEAD");
        return nullptr;
    }
    if (!f || f_threads != threads) {
        f = std::make_unique<Fixture>();
        f->model = Model::load(path);
        f->head = Eagle3Head::load(head, *f->model);
        SessionParams sp;
        sp.n_ctx = 2 * kCtx + 16;
        sp.n_threads = threads;
        sp.capture_layers = f->head->capture;
        f->session = std::make_unique<Session>(*f->model, sp);
        f->st = std::make_unique<Eagle3State>(*f->head, sp.n_ctx, KVType::F32, KVType::F32);
        for (int i = 0; i < kCtx; ++i) f->ctx.push_back(token_id(1 + (i * 37) % 500));
        Session& s = *f->session;
        s.eval(f->ctx);
        const int w = f->head->n_features(), td = f->head->target_embd;
        f->feat.resize(size_t(w) * kCtx);
        for (int p = 0; p < kCtx; ++p)
            for (size_t k = 0; k < f->head->column.size(); ++k)
                std::copy(s.captured(p) + td * f->head->column[k],
                          s.captured(p) + td * (f->head->column[k] + 1),
                          f->feat.begin() + ptrdiff_t(w) * p + ptrdiff_t(td * k));
        eagle3_encode(*f->head, *f->st, f->feat.data(), w, kCtx - 1, s.pool());
        eagle3_decode(*f->head, *f->st, std::span(f->ctx).subspan(1), f->st->g.data(), 0, s.pool());
        const size_t d = size_t(f->head->hp.n_embd);
        f->g.assign(f->st->hidden.begin() + ptrdiff_t(d * (kCtx - 2)),
                    f->st->hidden.begin() + ptrdiff_t(d * (kCtx - 1)));
        f_threads = threads;
    }
    return f.get();
}

// One chained draft: a row of [token, the head's own output] at position kCtx - 1.
void BM_eagle3_step(benchmark::State& state) {
    Fixture* f = fixture(state, int(state.range(0)));
    if (!f) return;
    Eagle3State& st = *f->st;
    const int base = st.kv.n_past();
    const token_id next = 7;
    for (auto _ : state) {
        eagle3_decode(*f->head, st, std::span(&next, 1), f->g.data(), base, f->session->pool());
        benchmark::DoNotOptimize(st.logits.data());
        st.kv.truncate(base);
    }
}

// A proposal's first pass after a verify of 4 rows: fc over 4 feature rows, 4 head rows.
void BM_eagle3_first_pass_4(benchmark::State& state) {
    Fixture* f = fixture(state, int(state.range(0)));
    if (!f) return;
    Eagle3State& st = *f->st;
    const int base = st.kv.n_past();
    const std::vector<token_id> next = {7, 8, 9, 10};
    const int w = f->head->n_features();
    for (auto _ : state) {
        eagle3_encode(*f->head, st, f->feat.data(), w, 4, f->session->pool());
        eagle3_decode(*f->head, st, next, st.g.data(), base, f->session->pool());
        benchmark::DoNotOptimize(st.logits.data());
        st.kv.truncate(base);
    }
}

void BM_target_pass_1(benchmark::State& state) {
    Fixture* f = fixture(state, int(state.range(0)));
    if (!f) return;
    Session& s = *f->session;
    const token_id next = 7;
    for (auto _ : state) {
        s.eval(std::span(&next, 1));
        benchmark::DoNotOptimize(s.logits(0));
        s.rollback(kCtx);
    }
}

}  // namespace

BENCHMARK(BM_eagle3_step)->ArgName("thr")->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_eagle3_first_pass_4)
    ->ArgName("thr")
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_target_pass_1)->ArgName("thr")->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
