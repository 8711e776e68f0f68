// What a user compares engines by, measured on the target alone: prompt processing (pp, one pass
// over `pp` prompt tokens), plain decoding (tg, taken from the sweep's plain row) and the cost of
// one target pass over b tokens (b = 1, 2, 5, 9 by default: the verify batches), each with the
// read bandwidth it achieves (the bytes one pass reads / time: Model::bytes_per_token() of weights,
// plus at depth the KV rows its attention reads) as a fraction of the machine's measured
// streaming-read bandwidth (bench/membw.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "model/session.h"

namespace specula {

struct ThroughputParams {
    int pp = 512;     // prompt-processing test length (0: skip)
    int depth = 0;    // cached positions before the pp pass (the passes sit on top of `ctx`)
    int pp_reps = 3;  // repetitions of the pp pass
    std::vector<int> pass_sizes{1, 2, 5, 9};  // batch sizes of the timed target passes
    // The machine's streaming-read bandwidth with the pool's threads, GB/s (measure_read_bandwidth,
    // bench/membw.h), measured by the caller before the model was loaded, so that its buffer
    // never adds to the model's peak resident memory; 0: not measured (no bandwidth columns).
    double read_gbs = 0;
    int n_threads = 0;                                  // threads of the pp session (0: hardware)
    int n_ubatch = SessionParams::kDefaultUbatch;       // the pp session's longest pass (-ub)
    KVType type_k = KVType::F32, type_v = KVType::F32;  // the pp session's KV cache
};

// One timed target pass over `batch` tokens (median of several), on top of a short prompt.
struct PassRow {
    int batch = 0;
    double ms = 0;   // median wall time of the pass
    double tau = 0;  // the median of ms / the batch-1 pass's ms, each over one round (paired)
};

// A hybrid model's (recurrent layers) verify pass over `batch` tokens that then rolls back to
// keep `keep` of them (the rest rejected: the state returns to position n_past + keep), against
// the same pass in a session without rollback support (the state updated in place: nothing kept,
// no snapshot). ratio = ms / base_ms, the "<= 1.2x" figure.
struct RollbackRow {
    int batch = 0, keep = 0;
    double ms = 0;       // median pass + rollback
    double base_ms = 0;  // median pass in a session without rollback support
    double ratio = 0;
};

struct Throughput {
    double read_gbs = 0;          // machine streaming-read bandwidth, GB/s
    int n_threads = 0;            // threads of the target session and of the read test
    int64_t bytes_per_token = 0;  // weight bytes one pass streams
    int64_t kv_bytes = 0;         // KV bytes one pass reads at `depth` (every row, once per pass)
    int pp = 0;                   // prompt-processing test length
    int depth = 0;                // cached positions under every figure
    double pp_tps = 0;            // prompt tokens/s over pp tokens (0: skipped)
    int tg = 0;                   // tokens per plain generation
    double tg_tps = 0;            // plain decoding tokens/s (the plain row's median)
    std::vector<PassRow> passes;
    std::vector<RollbackRow> rollbacks;  // hybrid models only: the largest batch, keep 1 and b - 1
};

double median(std::vector<double> v);

// Median time (ms) of a `batch`-token eval on top of `ctx` tokens, over `reps` tries (the part of
// ctx the session caches already is kept, so a long context is evaluated once).
double time_eval(Session& s, const std::vector<token_id>& ctx, int batch, int reps);

// t1: the measured time of a one-token pass, reused as the b = 1 row; tg / tg_tps: the plain
// decoding measured elsewhere. `session` is the target's; ctx a short prompt to time passes on.
Throughput measure_throughput(const ThroughputParams& p, const Model& target, Session& session,
                              const std::vector<token_id>& ctx, double t1, int tg, double tg_tps);

void print_throughput_table(const Throughput& tp, std::FILE* out);

}  // namespace specula
