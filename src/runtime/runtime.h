// The runtime every decoding command opens the same way (`run`, `chat`, `bench`, `serve`): ONE
// options struct and ONE function that loads the target (with its MTP sidecar), the speculative
// setup (draft model, vocabulary checked), resolves the context, makes the memory plan (logged,
// and refused when it does not fit, before any cache is allocated), then opens the target
// session and its drafter; and ONE function that makes GenParams from it. The commands differ
// only in the options they fill.
//
// The promises:
//  - `-c`: > 0 is that many positions; 0 is the model's training context (llama.cpp's rule, in
//    every command); kCtxDefault (serve and bench without -c) is the training context at most
//    4096 (SessionParams::kDefaultMaxCtx). A context past the training one warns; one too large
//    for memory fails the plan with an Error naming -c.
//  - the speculative flags are parsed once, by the command, into RuntimeOptions::speculative;
//    every field of it (draft length, --draft-min, --draft-p-min, the forced drafts, the n-gram
//    sizes) reaches every command through open_runtime and gen_params.
//  - a server's slots (n_seqs > 1) draw from one KV pool (server/serving/kv_pool.h): --kv-pool,
//    or -c as the total (ctx_is_total), or memory_fraction of the memory the rest of the plan
//    leaves; the plan counts the pool and the prompt cache (--cache-ram) and says so.
//  - drafters are made here only: open_runtime makes the one sequence's, new_drafter more over
//    the same loaded draft model (serve: one per slot, one per sampling request).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "model/load/model.h"
#include "model/memory_plan.h"
#include "model/session.h"
#include "sampling/sampler.h"
#include "speculative/config.h"
#include "speculative/make_drafter.h"
#include "speculative/sequence.h"

namespace specula {

struct Runtime;

struct RuntimeOptions {
    static constexpr int kCtxDefault = -1;  // -c not given (serve, bench): training, <= 4096

    std::string model_path;                      // -m
    OffloadParams gpu = env_placement().target;  // -ngl (the draft's: speculative.draft_gpu)
    // The drafter: method, draft model or MTP sidecar (-md), draft length, --draft-min, p-min,
    // forced drafts, n-gram sizes; parsed once by the command (cli/speculative_options.h).
    SpeculativeConfig speculative;
    int n_ctx = 0;      // -c: > 0 positions; 0 the training context; kCtxDefault: see above
    int n_threads = 0;  // -t; 0: hardware threads
    // -ub (llama.cpp's --ubatch-size): the most tokens one pass of a session takes, target and
    // draft; longer prompts go in passes of this many (the memory plan counts one such pass).
    int n_ubatch = SessionParams::kDefaultUbatch;
    KVType type_k = KVType::F32, type_v = KVType::F32;  // -ctk / -ctv, target and draft
    SamplingParams sampling;  // the target's sampling, which the drafter follows (open_session)
    // The logits rows one pass keeps at most, beyond a verify pass's (max_verify_rows): bench's
    // timed passes, serve's echo chunk.
    int logit_rows = 1;

    // One sequence (run, chat, bench): open_runtime opens its target Session and drafter. false
    // (serve): none; the scheduler opens its slots' sessions and takes drafters from new_drafter.
    bool open_session = true;
    int n_seqs = 1;  // sequences the plan counts (serve: --parallel)
    // n_seqs > 1: the KV pool in positions: kv_pool when > 0 (at least n_ctx), else n_ctx when
    // ctx_is_total (llama-server's -c), else memory_fraction (-1: 0.9) of the available memory
    // less the rest of the plan, at most n_seqs x n_ctx.
    int64_t kv_pool = 0;
    bool ctx_is_total = false;
    double memory_fraction = -1;
    // serve's --cache-ram in MiB (0: off; -1: what the plan leaves); not given: at most half of
    // what the plan leaves. Off for caches that are not plain host rows (windows, -ngl).
    long cache_ram_mib = 0;
    bool cache_ram_given = false;
    bool memory_check = true;  // false (--no-memory-check): a plan over memory only warns
    // serve's --memory-budget in MiB: the memory this process plans within, when less than
    // MemAvailable (scripts/cluster.sh gives each local replica its share of the host); 0: none.
    long memory_budget_mib = 0;
    bool check_tensors = false;  // --check-tensors: the target's weights scanned for NaN / inf
    std::string repack_cache;    // --repack-cache DIR (model/load/pack_cache.h): the target's

    std::string log_prefix;  // before each stderr line: "serve: ", "bench: ", "" (run)
    bool quiet = false;      // no stderr lines (run --log-disable); errors still throw
    // Called once the models are loaded and the context known, before the plan and any cache:
    // run refuses a prompt that cannot fit, chat picks its template; bench at --depth without -c
    // sets rt.n_ctx to what its filler needs (nothing else may change).
    std::function<void(Runtime&)> before_caches;
};

struct Runtime {
    std::unique_ptr<Model> target;
    SpeculativeSetup speculative;  // its config, the draft model every drafter shares
    int n_ctx = 0;                 // the resolved context of one sequence
    int n_threads = 0;             // resolved (default_threads)
    int n_ubatch = SessionParams::kDefaultUbatch;  // -ub: every session's and drafter's
    KVType type_k = KVType::F32, type_v = KVType::F32;
    double load_ms = 0;  // loading the target (and sidecar)
    MemoryPlan plan;     // as logged and checked; plan.kv_pool: serve's pool (0: none)
    // open_session: the one sequence's target session and its drafter (null: plain decoding).
    std::unique_ptr<Session> session;
    std::unique_ptr<Drafter> drafter;
};

// Throws Error naming the file or flag for anything bad, before any cache when it can.
Runtime open_runtime(const RuntimeOptions& options);

// A session's parameters for this runtime: its context, threads, KV types and -ub.
SessionParams session_params(const Runtime& rt);

// Another drafter over the runtime's loaded draft model or head (its passes at most rt.n_ubatch
// tokens); null without a drafter.
std::unique_ptr<Drafter> new_drafter(const Runtime& rt, const DrafterParams& params);

// The generation parameters of one sequence: the runtime's draft length (or n_draft, a request's
// own), --draft-min and the forced drafts, with the command's or request's n_predict and
// ignore_eos.
GenParams gen_params(const Runtime& rt, int n_predict, bool ignore_eos,
                     std::optional<int> n_draft = std::nullopt);

}  // namespace specula
