// SessionParams: how a Session (model/session.h) is made: its context, threads, KV cache types
// and pages, pass length, device layers, and what drafters take from its passes.
#pragma once

#include <memory>
#include <vector>

#include "common/threadpool.h"
#include "model/load/hparams.h"
#include "model/state/kv_cache.h"

namespace specula {

class ForwardPass;     // model/forward_pass.h: a pass's buffers and the pass itself
struct SequenceState;  // model/state/sequence_state.h: a Session's state

struct SessionParams {
    int n_ctx = 0;      // 0: the model's training context, capped at kDefaultMaxCtx
    int n_threads = 0;  // 0: hardware concurrency (unused with `pool`)
    // The KV cache's types (-ctk / -ctv). llama.cpp's default is F16; sessions made in code keep
    // F32 unless they ask.
    KVType type_k = KVType::F32;
    KVType type_v = KVType::F32;
    // A pool shared with other sessions (not owned; it must outlive the session). Sessions that
    // share one must not eval from two threads at once; model/batch_eval.h evaluates several of
    // them in one pass. Null: the session owns a pool of n_threads.
    ThreadPool* pool = nullptr;
    // Layers [0, n_gpu_layers) run on a device (model/load/offload.h); all of them and the output
    // head when n_gpu_layers >= n_layer. 0: everything on the CPU.
    // -1: the model's placement (Model::placement(), LoadOptions::gpu).
    int n_gpu_layers = -1;
    int gpu_device = -1;  // device index when n_gpu_layers >= 0 (-1: pick one)
    // A model with sliding-window layers (HParams::n_swa): the most tokens one pass writes, and
    // the furthest rollback, those layers' ring caches allow for (model/state/kv_cache.h). eval
    // splits longer token runs into passes of this many (the logits are the same); rollback and
    // prefix reuse further back than this are refused / start over. Ignored by other models.
    int swa_max_pass = kDefaultSwaMaxPass;
    static constexpr int kDefaultSwaMaxPass = 256;
    // A hybrid model (recurrent layers, model/state/recurrent_state.h): keep what an exact rollback
    // inside the last pass needs (a snapshot and the pass's inputs). false: the state is updated
    // in place and rollback reaches only n_past and 0 (the cost baseline). Ignored by others.
    bool recurrent_rollback = true;
    // The most tokens one pass takes (llama.cpp's -ub, n_ubatch): eval splits longer token runs
    // into passes of this many, so a pass's buffers (model/forward_pass.h) stay bounded whatever
    // the prompt's length. The logits are the same (batch invariance); a pass of n tokens streams
    // the weights once, so passes of 512 already run at the kernels' multi-token pace.
    int n_ubatch = kDefaultUbatch;
    static constexpr int kDefaultUbatch = 512;
    // The pass buffers, shared with the other sessions of this model that share `pool` (they
    // never eval at once): from make_shared_pass(model). Null: the session makes its own on its
    // first eval. A BatchEvaluator over sessions that share one runs its passes in it.
    std::shared_ptr<ForwardPass> shared_pass;
    // The KV cache on 4 KiB pages, so its committed memory follows the positions written
    // (Session::kv_touched, release_kv): a server's KV pool. false: 2 MiB pages where the system
    // has them (fewer TLB misses over a long cache).
    bool kv_small_pages = false;
    // The layers whose outputs (the residual stream after the layer's block, every token's row)
    // each eval keeps for a hidden-state drafter (EAGLE-3, DFlash): Session::captured. Distinct,
    // each in [0, n_layer - 1) (the last layer keeps only its output rows) and on the CPU (not
    // with device layers); Error otherwise. Empty: nothing is kept.
    std::vector<int> capture_layers;
    // Keep each logits row's final hidden state (after the output norm: the output matmul's
    // input) for a drafter that reads it (Medusa): Session::hidden. A model with an MTP head
    // keeps them always.
    bool keep_hidden = false;

    // The KV cache is preallocated for the whole context, so a default context is capped
    // (Llama 3 trains at 128k positions: ~8 GB of cache for a 1B model).
    static constexpr int kDefaultMaxCtx = 4096;
};

// The context a session of this model gets for SessionParams::n_ctx (0: the default above).
// Error for n_ctx < 0.
int resolve_ctx(const HParams& hp, int n_ctx);

}  // namespace specula
