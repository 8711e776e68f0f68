// Medusa heads over a server's slots: S slots' drafts as S single-row forwards (each slot on its
// own, as before the heads were batched) against one forward over the S rows
// (medusa_draft_rows: one matmul per head block and output), all heads drafting.
//   SPECULA_BENCH_MODEL=TARGET.gguf SPECULA_BENCH_MEDUSA=HEADS.gguf build/bin/bench_medusa
// (HEADS for TARGET: scripts/models/medusa_convert.py, or any file in docs/speculative.md's
// layout with the target's hidden size).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/threadpool.h"
#include "model/load/model.h"
#include "speculative/drafters/medusa_head.h"

namespace {

using namespace specula;

struct Fixture {
    std::unique_ptr<Model> target;
    std::unique_ptr<MedusaHeads> heads;
    std::unique_ptr<ThreadPool> pool;
    std::vector<std::vector<float>> hidden;  // one row per slot
};

Fixture* fixture(benchmark::State& state) {
    static std::unique_ptr<Fixture> f;
    const char* model = std::getenv("SPECULA_BENCH_MODEL");
    const char* heads = std::getenv("SPECULA_BENCH_MEDUSA");
    if (!model || !heads) {
        state.SkipWithError("set SPECULA_BENCH_MODEL and SPECULA_BENCH_MEDUSA (its Medusa heads)");
        return nullptr;
    }
    if (!f) {
        f = std::make_unique<Fixture>();
        f->target = Model::load(model);
        f->heads = MedusaHeads::load(heads, *f->target);
        f->pool = std::make_unique<ThreadPool>(default_threads(0));
        std::mt19937 rng(7);
        std::normal_distribution<float> n(0.f, 1.f);
        for (int s = 0; s < 16; ++s) {
            auto& h = f->hidden.emplace_back(size_t(f->heads->n_embd));
            for (float& v : h) v = n(rng);
        }
    }
    return f.get();
}

void BM_MedusaSlotsOneByOne(benchmark::State& state) {
    Fixture* f = fixture(state);
    if (!f) return;
    const int slots = int(state.range(0));
    MedusaState st;
    std::vector<token_id> out;
    for (auto _ : state)
        for (int s = 0; s < slots; ++s)
            medusa_draft(*f->heads, st, f->hidden[size_t(s)].data(), 16, out, *f->pool);
}

void BM_MedusaSlotsTogether(benchmark::State& state) {
    Fixture* f = fixture(state);
    if (!f) return;
    const int slots = int(state.range(0));
    MedusaState st;
    std::vector<const float*> rows;
    std::vector<std::vector<token_id>> outs(static_cast<size_t>(slots));
    std::vector<std::vector<token_id>*> out_ptrs;
    for (int s = 0; s < slots; ++s) {
        rows.push_back(f->hidden[size_t(s)].data());
        out_ptrs.push_back(&outs[size_t(s)]);
    }
    const std::vector<int> n(size_t(slots), 16);
    for (auto _ : state) medusa_draft_rows(*f->heads, st, rows, n, out_ptrs, *f->pool);
}

}  // namespace

BENCHMARK(BM_MedusaSlotsOneByOne)->Arg(1)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MedusaSlotsTogether)->Arg(1)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
