// open_runtime / new_drafter / gen_params: see runtime.h.
#include "runtime/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <new>

#include "common/clock.h"
#include "common/error.h"
#include "common/threadpool.h"
#include "speculative/drafter_memory.h"

namespace specula {

namespace {

// One stderr line after the options' prefix, unless quiet.
[[gnu::format(printf, 2, 3)]] void say(const RuntimeOptions& o, const char* fmt, ...) {
    if (o.quiet) return;
    std::fputs(o.log_prefix.c_str(), stderr);
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
}

// The context of one sequence under the -c rule (runtime.h).
int resolve_context(const RuntimeOptions& o, const HParams& hp) {
    if (o.n_ctx < RuntimeOptions::kCtxDefault) fail("-c (--ctx-size) must be >= 0, got ", o.n_ctx);
    if (o.n_ctx == RuntimeOptions::kCtxDefault) return resolve_ctx(hp, 0);
    const int n_ctx = o.n_ctx > 0          ? o.n_ctx
                      : hp.n_ctx_train > 0 ? hp.n_ctx_train
                                           : SessionParams::kDefaultMaxCtx;
    if (o.n_ctx > hp.n_ctx_train && hp.n_ctx_train > 0)
        say(o, "warning: -c %d is larger than the model's training context (%d)", o.n_ctx,
            hp.n_ctx_train);
    return n_ctx;
}

// The memory the plan may fill: MemAvailable, or --memory-budget when that is less.
double planned_memory(const RuntimeOptions& o) {
    if (o.memory_budget_mib < 0)
        fail("--memory-budget must be >= 0 MiB, got ", o.memory_budget_mib);
    const double mem = mem_available_bytes();
    const double budget = double(o.memory_budget_mib) * (1 << 20);
    if (budget <= 0 || (mem > 0 && mem <= budget)) return mem;
    say(o, "planning within --memory-budget %ld MiB (MemAvailable: %.0f MiB)", o.memory_budget_mib,
        mem / (1 << 20));
    return budget;
}

// The bound of --cache-ram in bytes for this plan (RuntimeOptions::cache_ram_mib); 0: off.
double prompt_cache_bytes(const RuntimeOptions& o, const Runtime& rt, const MemoryPlan& plan) {
    if (o.cache_ram_mib < -1)
        fail("--cache-ram must be -1 (what the memory plan leaves), 0 (off) or a size in MiB, got ",
             o.cache_ram_mib);
    if (o.cache_ram_mib == 0) return 0;
    const auto plain_rows = [](const Model& m) {
        return m.hparams().n_swa == 0 && m.hparams().n_recurrent() == 0 &&
               m.placement().n_gpu_layers == 0;
    };
    const Model* draft = rt.speculative.draft_model.get();
    if (!plain_rows(*rt.target) || (draft && !plain_rows(*draft))) {
        if (o.cache_ram_given)
            say(o,
                "--cache-ram ignored: this model's KV caches are not plain host rows "
                "(sliding-window layers, a recurrent state or -ngl)");
        return 0;
    }
    const double left = plan.available > 0 ? std::max(0.0, plan.available - plan.total()) : 0;
    const double mib = 1024.0 * 1024.0;
    if (o.cache_ram_mib == -1) return plan.available > 0 ? left : 8192 * mib;
    const double want = double(o.cache_ram_mib) * mib;
    if (o.cache_ram_given || plan.available <= 0) return want;
    return std::min(want, left / 2);
}

// The KV pool's positions for this plan of several sequences (RuntimeOptions::kv_pool); Error
// naming the flags when it cannot hold one sequence.
int64_t kv_pool_positions(const RuntimeOptions& o, int n_ctx, const MemoryPlan& plan) {
    const double per_pos = (plan.target_kv + plan.draft_kv) / n_ctx;
    int64_t pool = 0;
    std::string why;
    if (o.kv_pool > 0) {
        pool = o.kv_pool;
        why = "--kv-pool " + std::to_string(o.kv_pool);
    } else if (o.ctx_is_total) {
        pool = n_ctx;
    } else {
        const double f = o.memory_fraction >= 0 ? o.memory_fraction : 0.9;
        const int64_t most = int64_t(o.n_seqs) * n_ctx;
        if (plan.available <= 0 || per_pos <= 0) return most;
        // The plan without a pool counts every sequence's whole cache (kv_seqs of them).
        const double rest = plan.total() - plan.kv_seqs * (plan.target_kv + plan.draft_kv);
        pool = std::min<int64_t>(most, int64_t(std::max(0.0, f * plan.available - rest) / per_pos));
        why = "--gpu-memory-utilization " + std::to_string(f) + " of " +
              std::to_string(int64_t(plan.available / (1 << 20))) + " MiB available, less " +
              std::to_string(int64_t(rest / (1 << 20))) + " MiB for the rest of the plan";
    }
    if (pool < n_ctx)
        fail("the KV pool of ", pool, " positions (", why,
             ") cannot hold one sequence of the context, ", n_ctx,
             " positions (-c / --max-model-len): give a smaller context or a larger pool");
    return pool;
}

// The plan of every cache (and serve's pool and prompt cache), logged, then checked.
MemoryPlan plan_runtime(const RuntimeOptions& o, const Runtime& rt, double available) {
    const Model* draft = rt.speculative.draft_model.get();
    CachePlan cp{rt.n_ctx,
                 rt.n_threads,
                 rt.type_k,
                 rt.type_v,
                 o.n_seqs,
                 o.n_ubatch,
                 std::max(max_verify_rows(o.speculative), o.logit_rows)};
    cp.drafter = drafter_memory(rt.speculative, rt.n_ctx, rt.type_k, rt.type_v);
    MemoryPlan plan = plan_memory(*rt.target, draft, cp, available);
    if (o.n_seqs > 1) {
        cp.kv_pool = kv_pool_positions(o, rt.n_ctx, plan);
        const double runtime = plan.runtime;  // the pool was sized against this measurement
        plan = plan_memory(*rt.target, draft, cp, available);
        plan.runtime = runtime;
        say(o, "%d slots share a KV pool of %lld positions; one request may use up to %d (%s)",
            o.n_seqs, static_cast<long long>(cp.kv_pool), rt.n_ctx,
            o.kv_pool > 0    ? "--kv-pool"
            : o.ctx_is_total ? "-c: the cache all slots share, as llama-server's -kvu"
                             : "--gpu-memory-utilization of the available memory");
    } else if (o.kv_pool > 0) {
        // One slot keeps a plain cache of the whole context; a --kv-pool too small for it is
        // refused as with several slots, never ignored.
        kv_pool_positions(o, rt.n_ctx, plan);
        say(o, "one slot: its cache holds the whole context, %d positions (--kv-pool %lld)",
            rt.n_ctx, static_cast<long long>(o.kv_pool));
    }
    plan.prompt_cache = prompt_cache_bytes(o, rt, plan);
    say(o, "%s", describe(plan).c_str());
    if (o.memory_check) {
        check_memory(plan);
    } else if (plan.available > 0 && plan.total() > plan.available) {
        say(o,
            "warning: the memory plan exceeds the available memory; starting anyway "
            "(--no-memory-check)");
    }
    return plan;
}

// The KV cache is allocated up front; a context too large for memory is a user error.
std::unique_ptr<Session> open_session(const Model& model, const SessionParams& sp) {
    try {
        return std::make_unique<Session>(model, sp);
    } catch (const std::bad_alloc&) {
        fail("out of memory allocating the KV cache for a context of ", sp.n_ctx,
             " tokens (-c); try a smaller -c");
    }
}

}  // namespace

Runtime open_runtime(const RuntimeOptions& o) {
    if (o.n_seqs < 1) fail("--parallel must be >= 1, got ", o.n_seqs);
    if (o.speculative.n_draft < 0)
        fail("--draft must be >= 0 or auto, got ", o.speculative.n_draft);
    if (o.n_ubatch < 1) fail("-ub (--ubatch-size) must be >= 1, got ", o.n_ubatch);
    Runtime rt;
    rt.n_threads = default_threads(o.n_threads);
    rt.n_ubatch = o.n_ubatch;
    rt.type_k = o.type_k;
    rt.type_v = o.type_v;
    const double available = planned_memory(o);  // before the models take their share
    const auto t0 = clock_type::now();
    // An MTP sidecar (--spec-type mtp -md FILE) is part of the target's load.
    rt.target = Model::load(o.model_path, LoadOptions{.n_threads = rt.n_threads,
                                                      .gpu = o.gpu,
                                                      .mtp_sidecar = mtp_sidecar(o.speculative),
                                                      .check_tensors = o.check_tensors,
                                                      .repack_cache = o.repack_cache});
    rt.load_ms = ms_since(t0);
    // Both models are loaded (mapped) before any cache is allocated: the plan sees them all.
    SpeculativeConfig spec = o.speculative;
    spec.draft_repack_cache = o.repack_cache;
    rt.speculative = load_speculative(spec, *rt.target, o.model_path);
    rt.n_ctx = resolve_context(o, rt.target->hparams());
    if (o.before_caches) o.before_caches(rt);
    rt.plan = plan_runtime(o, rt, available);
    if (!o.open_session) return rt;
    rt.session = open_session(*rt.target, session_params(rt));
    // The draft follows the target through the whole context.
    rt.drafter =
        new_drafter(rt, DrafterParams{rt.n_ctx, rt.n_threads, o.sampling, rt.type_k, rt.type_v});
    return rt;
}

SessionParams session_params(const Runtime& rt) {
    SessionParams sp{rt.n_ctx, rt.n_threads, rt.type_k, rt.type_v};
    sp.n_ubatch = rt.n_ubatch;
    sp.capture_layers = capture_layers(rt.speculative);  // an EAGLE-3 head's
    sp.keep_hidden = keeps_hidden(rt.speculative);       // Medusa's heads read the final rows
    return sp;
}

std::unique_ptr<Drafter> new_drafter(const Runtime& rt, const DrafterParams& params) {
    DrafterParams p = params;
    p.n_ubatch = rt.n_ubatch;
    return make_drafter(rt.speculative, p);
}

GenParams gen_params(const Runtime& rt, int n_predict, bool ignore_eos,
                     std::optional<int> n_draft) {
    const SpeculativeConfig& c = rt.speculative.config;
    GenParams g;
    g.n_predict = n_predict;
    g.ignore_eos = ignore_eos;
    g.n_draft = n_draft.value_or(c.n_draft);
    g.draft_min = c.draft_min;
    g.n_forced = c.n_forced;
    return g;
}

}  // namespace specula
