// Microbenchmarks of matmul (kernels/matmul.h) for the main weight types at the shapes of a ~1B
// model (dim 2048, ffn 5632), with 1..16 tokens on 2 threads. Each iteration of BM_matmul uses a
// different copy of the weights out of >= 256 MiB, so the weights stream from memory as in real
// decoding rather than from the 32 MiB L3; BM_matmul_hot reuses one cache-resident copy. Counters:
// GB/s of weights streamed, that as a fraction of the machine's ~55 GB/s read bandwidth (bw_frac,
// the figure) and of the streaming-read bandwidth measured on this machine at start-up
// with 2 threads (of_read, bench/membw.h; BM_stream_read shows it per thread count).
// The token counts include 5 and 9, the verify batches of speculative decoding with 4 or 8 drafts.
//
//   build-x/bin/bench_kernels --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "bench/membw.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/matmul.h"
#include "kernels/policy.h"
#include "kernels/repack.h"
#include "kernels/table.h"
#include "model/blocks/attention.h"
#include "model/state/kv_cache.h"

using namespace specula;

namespace {

constexpr double kMachineBandwidth = 55e9;  // bytes/s, read
constexpr size_t kWeightPoolBytes = size_t(256) << 20;

// What this machine streams with 2 threads, bytes/s (measured once, on first use).
double measured_bandwidth() {
    static const double bw = [] {
        ThreadPool pool(2);
        return measure_read_bandwidth(pool) * 1e9;
    }();
    return bw;
}

uint64_t next_random(uint64_t& s) {  // xorshift64*
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
}

// Offset of the fp16 scale `d` (and of the second scale, or -1) in a block of type t.
std::pair<int, int> scale_offsets(GGMLType t) {
    switch (t) {
        case GGMLType::Q4_0:
            return {offsetof(block_q4_0, d), -1};
        case GGMLType::Q8_0:
            return {offsetof(block_q8_0, d), -1};
        case GGMLType::Q4_K:
            return {offsetof(block_q4_K, d), offsetof(block_q4_K, dmin)};
        case GGMLType::Q5_K:
            return {offsetof(block_q5_K, d), offsetof(block_q5_K, dmin)};
        case GGMLType::Q6_K:
            return {offsetof(block_q6_K, d), -1};
        case GGMLType::IQ4_XS:
            return {offsetof(block_iq4_xs, d), -1};
        default:
            return {-1, -1};
    }
}

// Random bytes, with every fp16 field set to a small normal number (no NaN/denormal slow paths).
struct WeightPool {
    GGMLType type = GGMLType::COUNT;
    std::vector<uint8_t> bytes;

    void fill(GGMLType t) {
        if (t == type) return;
        type = t;
        bytes.assign(kWeightPoolBytes, 0);
        uint64_t s = 0x9E3779B97F4A7C15ull;
        for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
            const uint64_t r = next_random(s);
            std::memcpy(&bytes[i], &r, 8);
        }
        const fp16_t small = fp32_to_fp16(0.01f);
        if (t == GGMLType::F16 || t == GGMLType::BF16) {
            // Every element a normal number in (-0.05, 0.05), as trained weights are: random BF16
            // bits include float denormals, which cost Intel's FMA a microcode assist each (the
            // BF16 panels measured 5.5x slower than F16 on Emerald Rapids with them).
            for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
                uint16_t r;
                std::memcpy(&r, &bytes[i], 2);
                const float x = (static_cast<float>(r % 2001) / 1000.f - 1.f) * 0.05f + 1e-4f;
                const uint16_t v = t == GGMLType::F16 ? fp32_to_fp16(x) : fp32_to_bf16(x);
                std::memcpy(&bytes[i], &v, 2);
            }
            return;
        }
        const size_t bs = type_traits(t).type_size;
        if (t == GGMLType::MXFP4) {  // E8M0 exponents of 2^-7 (the nibbles stay random)
            for (size_t off = 0; off + bs <= bytes.size(); off += bs) bytes[off] = 120;
            return;
        }
        const auto [d, m] = scale_offsets(t);
        for (size_t off = 0; off + bs <= bytes.size(); off += bs) {
            std::memcpy(&bytes[off + d], &small, 2);
            if (m >= 0) std::memcpy(&bytes[off + m], &small, 2);
        }
    }
};

WeightPool& pool_for(GGMLType t) {
    static WeightPool pool;
    pool.fill(t);
    return pool;
}

ThreadPool& threads(int n) {
    static ThreadPool one(1), two(2);
    return n == 1 ? one : two;
}

// Args: rows, cols, ntok, threads. `hot`: always the same copy (cache-resident weights), which
// measures the kernels' compute ceiling rather than memory bandwidth.
// Every copy of the pool's matrix in the packed layout (kernels/repack.h), made once per shape.
const uint8_t* packed_copies(const WeightPool& pool, int64_t rows, int64_t cols, size_t copies) {
    static std::map<std::tuple<GGMLType, int64_t, int64_t>, std::unique_ptr<PackedBuffer>> made;
    auto& buf = made[{pool.type, rows, cols}];
    if (!buf) {
        const size_t mat_bytes = row_size(pool.type, cols) * rows;
        const size_t packed_bytes = packed_size({pool.type, rows, cols, nullptr});
        buf = std::make_unique<PackedBuffer>(packed_bytes * copies);
        for (size_t c = 0; c < copies; ++c) {
            repack({pool.type, rows, cols, pool.bytes.data() + c * mat_bytes},
                   buf->data() + c * packed_bytes);
        }
    }
    return buf->data();
}

// `packed`: the weights in the packed layout (Q8_0), made from the same copies.
void run_matmul(benchmark::State& state, GGMLType type, bool hot, bool packed = false) {
    const int64_t rows = state.range(0), cols = state.range(1);
    const int ntok = static_cast<int>(state.range(2));
    ThreadPool& tp = threads(static_cast<int>(state.range(3)));
    WeightPool& pool = pool_for(type);
    const size_t mat_bytes = row_size(type, cols) * rows;
    const size_t copies = hot ? 1 : pool.bytes.size() / mat_bytes;
    const size_t packed_bytes = packed ? packed_size({type, rows, cols, nullptr}) : 0;
    const uint8_t* packed_base = packed ? packed_copies(pool, rows, cols, copies) : nullptr;
    std::vector<float> x(static_cast<size_t>(ntok) * cols), y(static_cast<size_t>(ntok) * rows);
    for (size_t i = 0; i < x.size(); ++i)
        x[i] = static_cast<float>((i * 7919) % 2001) / 1000.f - 1.f;
    MatmulScratch scratch;
    size_t copy = 0;
    for (auto _ : state) {
        WeightView W{type, rows, cols, pool.bytes.data() + copy * mat_bytes};
        if (packed) W.packed = packed_base + copy * packed_bytes;
        matmul(W, x.data(), cols, ntok, y.data(), rows, tp, scratch);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
        copy = (copy + 1) % copies;
    }
    const double b = static_cast<double>(mat_bytes);
    state.counters["GB/s"] =
        benchmark::Counter(b / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["bw_frac"] =
        benchmark::Counter(b / kMachineBandwidth, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["of_read"] =
        benchmark::Counter(b / measured_bandwidth(), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["tok/s"] =
        benchmark::Counter(ntok, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(simd_level_name(active_simd_level()));
}

void BM_matmul(benchmark::State& state, GGMLType type) {
    run_matmul(state, type, false);
}
void BM_matmul_hot(benchmark::State& state, GGMLType type) {
    run_matmul(state, type, true);
}
// Q8_0 in the packed layout (kernels/repack.h), streamed from memory like BM_matmul.
void BM_matmul_packed(benchmark::State& state) {
    run_matmul(state, GGMLType::Q8_0, false, true);
}

// Q4_K / Q6_K in their packed layout (kernels/layout/repack_k.h), F16 / BF16 in panels
// (layout/repack_float.h).
void BM_matmul_packed_k(benchmark::State& state, GGMLType type) {
    run_matmul(state, type, false, true);
}

void BM_matmul_packed_k_hot(benchmark::State& state, GGMLType type) {
    run_matmul(state, type, true, true);
}

void shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"rows", "cols", "ntok", "thr"});
    for (auto [r, c] : {std::pair{2048, 2048}, {5632, 2048}, {2048, 5632}}) {
        for (int ntok : {1, 2, 4, 5, 8, 9, 16}) b->Args({r, c, ntok, 2});
    }
    b->Args({5632, 2048, 1, 1});  // one thread, for per-core throughput
    b->UseRealTime();
}

// One kernel on one thread over 64 rows of 2048 columns that stay in L1/L2: the per-core compute
// ceiling, in CPU time (so it stays meaningful when other processes share the cores).
// Args: ntok.
void BM_vec_dot(benchmark::State& state, GGMLType type) {
    constexpr int64_t kCols = 2048, kRows = 64;
    const int ntok = static_cast<int>(state.range(0));
    const uint8_t* w = pool_for(type).bytes.data();
    const size_t rb = row_size(type, kCols);
    std::vector<float> x(static_cast<size_t>(ntok) * kCols);
    for (size_t i = 0; i < x.size(); ++i)
        x[i] = static_cast<float>((i * 7919) % 2001) / 1000.f - 1.f;
    MatmulScratch scratch;
    const size_t stride = quantize_acts(type, x.data(), kCols, kCols, ntok, scratch);
    const VecDotFn fn = best_vec_dot(type);
    std::vector<float> out(ntok);
    for (auto _ : state) {
        for (int64_t r = 0; r < kRows; ++r) {
            fn(kCols, w + r * rb, scratch.acts.data(), stride, ntok, out.data());
        }
        benchmark::DoNotOptimize(out.data());
    }
    const double b = static_cast<double>(rb * kRows);
    state.counters["GB/s"] =
        benchmark::Counter(b / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["ns/row/tok"] =
        benchmark::Counter(kRows * ntok * 1e-9, benchmark::Counter::kIsIterationInvariantRate |
                                                    benchmark::Counter::kInvert);
    state.SetLabel(simd_level_name(active_simd_level()));
}

void hot_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"rows", "cols", "ntok", "thr"});
    for (int ntok : {1, 2, 4, 5, 8, 9, 16}) b->Args({2048, 2048, ntok, 2});
    b->Args({2048, 2048, 1, 1});
    b->UseRealTime();
}

// BM_vec_dot's token counts.
void ntoks(benchmark::internal::Benchmark* b) {
    b->ArgName("ntok");
    for (int ntok : {1, 2, 4, 5, 8, 9, 16}) b->Arg(ntok);
}

// The verify and prompt batch sizes on the FFN shape (and one thread at batch 1).
void packed_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"rows", "cols", "ntok", "thr"});
    for (int ntok : {1, 2, 5, 9, 512}) b->Args({5632, 2048, ntok, 2});
    b->Args({5632, 2048, 1, 1});
    b->UseRealTime();
}

// Sum of the 32-byte words of [p, p + n) as 8 int32 lanes, 4 loads in flight (AVX2 when the CPU
// has it: the kernels' own load width).

// A pure streaming read of 1 GiB by the pool's threads, each over its own contiguous slice: the
// read bandwidth this machine really gives the kernels (the ceiling for cold weights; compare
// BM_matmul's GB/s with it). Args: threads.
void BM_stream_read(benchmark::State& state) {
    constexpr size_t kBytes = size_t(1) << 30;
    ThreadPool& tp = threads(static_cast<int>(state.range(0)));
    static std::unique_ptr<uint8_t[], decltype(&std::free)> buf(
        static_cast<uint8_t*>(std::aligned_alloc(64, kBytes)), &std::free);
    static bool filled = [] {
        std::memset(buf.get(), 1, kBytes);
        return true;
    }();
    (void)filled;
    std::vector<uint64_t> sums(tp.size());
    for (auto _ : state) {
        tp.run([&](int ith, int nth) {
            const size_t per = kBytes / nth / 128 * 128;
            const uint8_t* p = buf.get() + ith * per;
            sums[ith] = read_sum(p, per);
        });
        benchmark::DoNotOptimize(sums.data());
    }
    state.counters["GB/s"] =
        benchmark::Counter(kBytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["bw_frac"] = benchmark::Counter(kBytes / kMachineBandwidth,
                                                   benchmark::Counter::kIsIterationInvariantRate);
}

// One ThreadPool::run with an empty job: the fork-join barrier a decode step pays ~80 times per
// token (one per matmul pass), in ns.
void BM_pool_barrier(benchmark::State& state) {
    ThreadPool& tp = threads(static_cast<int>(state.range(0)));
    std::vector<int> hits(static_cast<size_t>(tp.size()));
    for (auto _ : state) {
        tp.run([&](int ith, int) { ++hits[static_cast<size_t>(ith)]; });
        benchmark::DoNotOptimize(hits.data());
    }
}

}  // namespace

BENCHMARK(BM_pool_barrier)->ArgName("thr")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_stream_read)->ArgName("thr")->Arg(1)->Arg(2)->UseRealTime()->Iterations(3);

BENCHMARK_CAPTURE(BM_matmul, Q8_0, GGMLType::Q8_0)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, Q4_0, GGMLType::Q4_0)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, Q4_K, GGMLType::Q4_K)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, Q5_K, GGMLType::Q5_K)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, Q6_K, GGMLType::Q6_K)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, IQ4_XS, GGMLType::IQ4_XS)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, F16, GGMLType::F16)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, BF16, GGMLType::BF16)->Apply(shapes);
// The other weight types at the FFN shape (every kernel has a benchmark).
void one_shape(benchmark::internal::Benchmark* b) {
    b->ArgNames({"rows", "cols", "ntok", "thr"})->UseRealTime();
    for (int ntok : {1, 5, 9}) b->Args({5632, 2048, ntok, 2});
}
BENCHMARK_CAPTURE(BM_matmul, F32, GGMLType::F32)->Apply(one_shape);
BENCHMARK_CAPTURE(BM_matmul, Q4_1, GGMLType::Q4_1)->Apply(one_shape);
BENCHMARK_CAPTURE(BM_matmul, Q5_0, GGMLType::Q5_0)->Apply(one_shape);
BENCHMARK_CAPTURE(BM_matmul, Q5_1, GGMLType::Q5_1)->Apply(one_shape);
BENCHMARK_CAPTURE(BM_matmul, Q2_K, GGMLType::Q2_K)->Apply(one_shape);
BENCHMARK_CAPTURE(BM_matmul, Q3_K, GGMLType::Q3_K)->Apply(one_shape);
BENCHMARK_CAPTURE(BM_matmul, IQ4_NL, GGMLType::IQ4_NL)->Apply(one_shape);
BENCHMARK_CAPTURE(BM_matmul, MXFP4, GGMLType::MXFP4)->Apply(one_shape);

BENCHMARK(BM_matmul_packed)->Apply(packed_shapes);
BENCHMARK_CAPTURE(BM_matmul_packed_k, Q4_K, GGMLType::Q4_K)->Apply(packed_shapes);
BENCHMARK_CAPTURE(BM_matmul_packed_k, Q6_K, GGMLType::Q6_K)->Apply(packed_shapes);
// The same kernels on one thread over a cache-resident 512 x 2048 matrix, in CPU time: their
// compute ceiling (next to BM_matmul_hot's row-layout kernels).
void packed_hot_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"rows", "cols", "ntok", "thr"});
    for (int ntok : {1, 2, 5, 9, 16, 64, 512}) b->Args({512, 2048, ntok, 1});
}
BENCHMARK_CAPTURE(BM_matmul_packed_k_hot, Q4_K, GGMLType::Q4_K)->Apply(packed_hot_shapes);
// Packed Q8_0 and Q4_K the same way, on AVX-512 VNNI (the policy's AMX off) and on AMX tiles
// (kernels/amx/) where the CPU has them.
void BM_matmul_packed_amx_hot(benchmark::State& state, GGMLType type, const char* amx) {
    const bool on = std::strcmp(amx, "0") != 0;
    if (on && !cpu_has_amx()) {
        state.SkipWithError("this CPU has no AMX");
        return;
    }
    KernelPolicy p = kernel_policy();
    p.amx = on ? AmxMode::Hardware : AmxMode::Off;
    const ScopedKernelPolicy policy(p);
    run_matmul(state, type, true, true);
}
BENCHMARK_CAPTURE(BM_matmul_packed_amx_hot, Q8_0_vnni, GGMLType::Q8_0, "0")
    ->Apply(packed_hot_shapes);
BENCHMARK_CAPTURE(BM_matmul_packed_amx_hot, Q8_0_amx, GGMLType::Q8_0, "1")
    ->Apply(packed_hot_shapes);
BENCHMARK_CAPTURE(BM_matmul_packed_amx_hot, Q4_K_vnni, GGMLType::Q4_K, "0")
    ->Apply(packed_hot_shapes);
BENCHMARK_CAPTURE(BM_matmul_packed_amx_hot, Q4_K_amx, GGMLType::Q4_K, "1")
    ->Apply(packed_hot_shapes);
BENCHMARK_CAPTURE(BM_matmul_packed_k_hot, Q6_K, GGMLType::Q6_K)->Apply(packed_hot_shapes);
BENCHMARK_CAPTURE(BM_matmul_hot, Q4_K_rows512, GGMLType::Q4_K)->Apply(packed_hot_shapes);
BENCHMARK_CAPTURE(BM_matmul_hot, Q6_K_rows512, GGMLType::Q6_K)->Apply(packed_hot_shapes);
BENCHMARK_CAPTURE(BM_matmul, Q8_0_pp, GGMLType::Q8_0)
    ->ArgNames({"rows", "cols", "ntok", "thr"})
    ->Args({5632, 2048, 512, 2})
    ->UseRealTime();  // the row layout at prompt size, to compare

BENCHMARK_CAPTURE(BM_matmul_hot, Q8_0, GGMLType::Q8_0)->Apply(hot_shapes);
BENCHMARK_CAPTURE(BM_matmul_hot, Q4_0, GGMLType::Q4_0)->Apply(hot_shapes);
BENCHMARK_CAPTURE(BM_matmul_hot, Q4_K, GGMLType::Q4_K)->Apply(hot_shapes);
BENCHMARK_CAPTURE(BM_matmul_hot, Q6_K, GGMLType::Q6_K)->Apply(hot_shapes);

BENCHMARK_CAPTURE(BM_vec_dot, Q8_0, GGMLType::Q8_0)->Apply(ntoks);
BENCHMARK_CAPTURE(BM_vec_dot, Q4_0, GGMLType::Q4_0)->Apply(ntoks);
BENCHMARK_CAPTURE(BM_vec_dot, Q4_K, GGMLType::Q4_K)->Apply(ntoks);
BENCHMARK_CAPTURE(BM_vec_dot, Q5_K, GGMLType::Q5_K)->Apply(ntoks);
BENCHMARK_CAPTURE(BM_vec_dot, Q6_K, GGMLType::Q6_K)->Apply(ntoks);
BENCHMARK_CAPTURE(BM_vec_dot, IQ4_XS, GGMLType::IQ4_XS)->Apply(ntoks);
BENCHMARK_CAPTURE(BM_vec_dot, F16, GGMLType::F16)->Apply(ntoks);

// K-quants at the speculative verify batch sizes (1 + draft 4 or 8 tokens), cold and hot.
BENCHMARK_CAPTURE(BM_matmul, Q4_K_verify, GGMLType::Q4_K)
    ->ArgNames({"rows", "cols", "ntok", "thr"})
    ->ArgsProduct({{5632}, {2048}, {1, 2, 4, 5, 8, 9}, {2}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_matmul, Q5_K_verify, GGMLType::Q5_K)
    ->ArgNames({"rows", "cols", "ntok", "thr"})
    ->ArgsProduct({{5632}, {2048}, {1, 2, 4, 5, 8, 9}, {2}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_matmul, Q6_K_verify, GGMLType::Q6_K)
    ->ArgNames({"rows", "cols", "ntok", "thr"})
    ->ArgsProduct({{5632}, {2048}, {1, 2, 4, 5, 8, 9}, {2}})
    ->UseRealTime();
// Prompt processing: 512 tokens in one matmul (the K-quants' row-pair kernels at AVX-512).
void pp_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"rows", "cols", "ntok", "thr"})->UseRealTime();
    for (auto [r, c] : {std::pair{5632, 2048}, {2048, 5632}}) b->Args({r, c, 512, 2});
}
BENCHMARK_CAPTURE(BM_matmul, Q4_K_pp, GGMLType::Q4_K)->Apply(pp_shapes);
BENCHMARK_CAPTURE(BM_matmul, Q5_K_pp, GGMLType::Q5_K)->Apply(pp_shapes);
BENCHMARK_CAPTURE(BM_matmul, Q6_K_pp, GGMLType::Q6_K)->Apply(pp_shapes);
BENCHMARK_CAPTURE(BM_vec_dot, Q4_K_verify, GGMLType::Q4_K)->ArgName("ntok")->Arg(5)->Arg(9);
BENCHMARK_CAPTURE(BM_vec_dot, Q5_K_verify, GGMLType::Q5_K)->ArgName("ntok")->Arg(5)->Arg(9);
BENCHMARK_CAPTURE(BM_vec_dot, Q6_K_verify, GGMLType::Q6_K)->ArgName("ntok")->Arg(5)->Arg(9);

// The float types at the decode, verify and prompt (512) batch sizes.
BENCHMARK_CAPTURE(BM_matmul, F16_batch, GGMLType::F16)
    ->ArgNames({"rows", "cols", "ntok", "thr"})
    ->ArgsProduct({{5632}, {2048}, {1, 2, 5, 9, 512}, {2}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_matmul, BF16_batch, GGMLType::BF16)
    ->ArgNames({"rows", "cols", "ntok", "thr"})
    ->ArgsProduct({{5632}, {2048}, {1, 2, 5, 9, 512}, {2}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_matmul, F32_batch, GGMLType::F32)
    ->ArgNames({"rows", "cols", "ntok", "thr"})
    ->ArgsProduct({{5632}, {2048}, {1, 2, 5, 9, 512}, {2}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_matmul, F16_down, GGMLType::F16)
    ->ArgNames({"rows", "cols", "ntok", "thr"})
    ->ArgsProduct({{2048}, {5632}, {1, 2, 5, 9, 512}, {2}})
    ->UseRealTime();
// One thread, the same copy every time: the float kernels' per-core compute, in CPU time (which
// stays meaningful when other processes share the cores).
void float_core_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"rows", "cols", "ntok", "thr"});
    for (auto [r, c] : {std::pair{1024, 2048}, {512, 5632}}) {
        for (int ntok : {1, 2, 5, 9, 512}) b->Args({r, c, ntok, 1});
    }
}
BENCHMARK_CAPTURE(BM_matmul_hot, F16_core, GGMLType::F16)->Apply(float_core_shapes);
// F16 / BF16 in the panel layout (kernels/layout/repack_float.h), as Model::load packs them:
// streamed (the FFN up/gate and down shapes) and cache-resident on one thread, next to the rows
// above.
void float_packed_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"rows", "cols", "ntok", "thr"})->UseRealTime();
    for (auto [r, c] : {std::pair{5632, 2048}, {2048, 5632}}) {
        for (int ntok : {1, 2, 5, 9, 512}) b->Args({r, c, ntok, 2});
    }
}
BENCHMARK_CAPTURE(BM_matmul_packed_k, F16_panels, GGMLType::F16)->Apply(float_packed_shapes);
BENCHMARK_CAPTURE(BM_matmul_packed_k, BF16_panels, GGMLType::BF16)->Apply(float_packed_shapes);
BENCHMARK_CAPTURE(BM_matmul_packed_k_hot, F16_panels_core, GGMLType::F16)->Apply(float_core_shapes);
BENCHMARK_CAPTURE(BM_matmul_packed_k_hot, BF16_panels_core, GGMLType::BF16)
    ->Apply(float_core_shapes);
BENCHMARK_CAPTURE(BM_matmul_hot, BF16_core, GGMLType::BF16)->Apply(float_core_shapes);
BENCHMARK_CAPTURE(BM_matmul_hot, F32_core, GGMLType::F32)->Apply(float_core_shapes);

// Writes positions [0, n) of layers [0, n_layer) of a cache of `width` values per row with a
// fixed pattern of values in [-0.5, 0.5) (shifted by the layer).
void fill_kv(KVCache& kv, int n_layer, int n, int width) {
    std::vector<float> kr(width), vr(width);
    for (int il = 0; il < n_layer; ++il) {
        for (int p = 0; p < n; ++p) {
            for (int i = 0; i < width; ++i) {
                kr[i] = static_cast<float>((p * 31 + i * 7 + il) % 97) / 97.f - 0.5f;
                vr[i] = static_cast<float>((p * 13 + i * 5 + il) % 89) / 89.f - 0.5f;
            }
            kv.write(il, p, kr.data(), vr.data());
        }
    }
}

// Times attention() over ntok new positions after pos0 in layer 0 of kv, on 2 threads.
void time_attention(benchmark::State& state, const KVCache& kv, const AttentionShape& s, int pos0,
                    int ntok) {
    ThreadPool& tp = threads(2);
    std::vector<float> q(static_cast<size_t>(ntok) * s.n_head * s.head_dim, 0.25f), out(q.size());
    std::vector<float> scores(attention_scratch_floats(s, kv.n_ctx(), tp.size()));
    for (auto _ : state) {
        attention(kv, 0, pos0, ntok, q.data(), out.data(), s, tp, scores.data());
        benchmark::DoNotOptimize(out.data());
    }
}

// One layer's attention at the ~1B target's shape (32 heads over 16 KV heads of 64), 2 threads:
// ntok new positions after 512 cached ones, or (ntok 512) a whole prompt from position 0; an F32
// cache, and an F16 one (llama.cpp's default, read in place by the blocked kernels).
void BM_attention(benchmark::State& state, KVType type) {
    const int ntok = static_cast<int>(state.range(0));
    const int pos0 = ntok >= 512 ? 0 : 512;
    const AttentionShape s{32, 16, 64, 0.125f};
    KVCache kv(1, 1024, 16 * 64, type, type, {}, 0, 64);
    fill_kv(kv, 1, pos0 + ntok, 16 * 64);
    time_attention(state, kv, s, pos0, ntok);
    state.counters["tok/s"] =
        benchmark::Counter(ntok, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(simd_level_name(active_simd_level()));
}
void attention_batches(benchmark::internal::Benchmark* b) {
    b->ArgName("ntok");
    for (int n : {1, 2, 5, 9, 512}) b->Arg(n);
    b->UseRealTime();
}
BENCHMARK_CAPTURE(BM_attention, F32, KVType::F32)->Apply(attention_batches);
BENCHMARK_CAPTURE(BM_attention, F16, KVType::F16)->Apply(attention_batches);

// Attention over a long cache (issue 28): ntok new positions after `depth` cached ones, at the
// ~1B target's shape, over 4 layers in turn so that the cache is streamed from memory as in a
// real pass (one layer's F16 K and V at depth 8192: 32 MiB), 2 threads. GB/s: the K and V bytes
// the pass must read (each row once), per second.
void BM_attention_depth(benchmark::State& state, KVType type) {
    const int depth = static_cast<int>(state.range(0)), ntok = static_cast<int>(state.range(1));
    const int n_layer = 4;
    const AttentionShape s{32, 16, 64, 0.125f};
    KVCache kv(n_layer, depth + ntok, 16 * 64, type, type, {}, 0, 64);
    fill_kv(kv, n_layer, depth + ntok, 16 * 64);
    ThreadPool& tp = threads(2);
    std::vector<float> q(static_cast<size_t>(ntok) * 32 * 64, 0.25f), out(q.size());
    std::vector<float> scores(attention_scratch_floats(s, kv.n_ctx(), tp.size()));
    for (auto _ : state) {
        for (int il = 0; il < n_layer; ++il)
            attention(kv, il, depth, ntok, q.data(), out.data(), s, tp, scores.data());
        benchmark::DoNotOptimize(out.data());
    }
    const double row = type == KVType::F16 ? 2.0 : type == KVType::Q8_0 ? 34.0 / 32 : 4.0;
    state.counters["GB/s"] =
        benchmark::Counter(2.0 * row * 16 * 64 * (depth + ntok) * n_layer / 1e9,
                           benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(simd_level_name(active_simd_level()));
}
void depth_batches(benchmark::internal::Benchmark* b) {
    b->ArgNames({"depth", "ntok"});
    for (int d : {4096, 8192, 16384}) {
        for (int n : {1, 9, 16}) b->Args({d, n});
    }
    b->UseRealTime();
}
BENCHMARK_CAPTURE(BM_attention_depth, F16, KVType::F16)->Apply(depth_batches);

// A prompt's attention at depth at Qwen3-8B's shape (32 query heads over 8 KV heads of 128), one
// layer, 2 threads: ntok new positions (512: llama-bench's pp512 after -d depth; 1 and 9: a
// decoding step and a verify pass there) over an F16 cache.
// GMAC/s: the multiply-adds of the scores and the weighted sums (each query against every
// position up to its own), per second.
void BM_attention_prompt_depth(benchmark::State& state) {
    const int depth = static_cast<int>(state.range(0)), ntok = static_cast<int>(state.range(1));
    const AttentionShape s{32, 8, 128, 0.08838835f};
    KVCache kv(1, depth + ntok, 8 * 128, KVType::F16, KVType::F16, {}, 0, 128);
    fill_kv(kv, 1, depth + ntok, 8 * 128);
    time_attention(state, kv, s, depth, ntok);
    const double keys = static_cast<double>(ntok) * depth + ntok * (ntok + 1) / 2.0;
    state.counters["GMAC/s"] = benchmark::Counter(2.0 * keys * 32 * 128 / 1e9,
                                                  benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(simd_level_name(active_simd_level()));
}
BENCHMARK(BM_attention_prompt_depth)
    ->ArgNames({"depth", "ntok"})
    ->Args({8192, 512})
    ->Args({0, 512})
    ->Args({8192, 1})
    ->Args({8192, 9})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_attention_depth, Q8_0, KVType::Q8_0)->Apply(depth_batches);

BENCHMARK_MAIN();
