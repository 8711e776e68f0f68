// MTP head microbenchmarks on a model file with an MTP (nextn) layer, given by
// SPECULA_BENCH_MODEL (e.g. scripts/models/make_models.py bench --arch qwen35): one head step
// (Session::eval_mtp over one row, on top of a 64-position head cache, rolled back after each
// step so the cache stays that long), the same step right after a target pass, and one target
// pass over one token at the same depth.
// The "one MTP step <= 5% of a target pass" is the ratio of the two.
//   SPECULA_BENCH_MODEL=qwen35-mtp1-d2048-l16-Q8_0.gguf build/bin/bench_mtp
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "model/load/model.h"
#include "model/session.h"

namespace {

using namespace specula;

constexpr int kCtx = 64;

struct Fixture {
    std::unique_ptr<Model> model;
    std::unique_ptr<Session> session;
    std::vector<token_id> ctx;
    std::vector<float> h;  // the target's last hidden row after the context
};

// Loaded once: the model, a session holding kCtx positions and a head cache of kCtx - 1.
Fixture* fixture(benchmark::State& state, int threads) {
    static std::unique_ptr<Fixture> f;
    static int f_threads = 0;
    const char* path = std::getenv("SPECULA_BENCH_MODEL");
    if (!path) {
        state.SkipWithError("set SPECULA_BENCH_MODEL to a GGUF file with an MTP layer");
        return nullptr;
    }
    if (!f || f_threads != threads) {
        f = std::make_unique<Fixture>();
        f->model = Model::load(path);
        if (!f->model->has_mtp()) {
            state.SkipWithError("the model has no MTP layer");
            f.reset();
            return nullptr;
        }
        SessionParams sp;
        sp.n_ctx = 2 * kCtx + 16;
        sp.n_threads = threads;
        f->session = std::make_unique<Session>(*f->model, sp);
        for (int i = 0; i < kCtx; ++i) f->ctx.push_back(token_id(1 + (i * 37) % 500));
        f->session->eval(f->ctx);
        f->session->eval_mtp(std::span(f->ctx).subspan(1), f->session->hidden(0));
        const float* h = f->session->hidden(kCtx - 1);
        f->h.assign(h, h + f->model->hparams().n_embd);
        f_threads = threads;
    }
    return f.get();
}

// range(1) = 1: each step right after a target pass (untimed), as the first step of a draft
// round finds the caches: the pass has streamed every main weight through them.
void BM_mtp_step(benchmark::State& state) {
    Fixture* f = fixture(state, int(state.range(0)));
    if (!f) return;
    const bool after_pass = state.range(1) != 0;
    Session& s = *f->session;
    const int base = s.mtp_n_past();
    const token_id next = 7;
    for (auto _ : state) {
        if (after_pass) {
            state.PauseTiming();
            s.eval(std::span(&next, 1));
            s.rollback(kCtx);
            state.ResumeTiming();
        }
        s.eval_mtp(std::span(&next, 1), f->h.data());
        benchmark::DoNotOptimize(s.mtp_logits(0));
        s.mtp_rollback(base);
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

BENCHMARK(BM_mtp_step)
    ->ArgNames({"thr", "after_pass"})
    ->Args({2, 0})
    ->Args({2, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_target_pass_1)->ArgName("thr")->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
