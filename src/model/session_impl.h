// Internal to model/: the state of a Session (its KV cache, its logits, what drafters take from
// its passes, the pool it runs on) and a sequence's share of a pass. Session::eval runs a pass
// over one sequence; BatchEvaluator (model/batch_eval.h) runs one pass over rows of several,
// each row reading and writing only its own sequence's cache, so a row's logits do not depend
// on what else shares the pass.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "common/threadpool.h"
#include "model/kv_cache.h"
#include "model/offload.h"
#include "model/recurrent_state.h"
#include "model/session.h"

namespace specula {

struct Session::Impl {
    Impl(const Model& m, const SessionParams& p);
    ~Impl();

    const Model& model;
    std::unique_ptr<ThreadPool> own_pool;  // null when built over SessionParams::pool
    ThreadPool* pool;
    KVCache kv;
    RecurrentState rec;  // hybrid models' recurrent layers (empty otherwise)
    // Made on the first Session::eval, or SessionParams::shared_pass.
    std::shared_ptr<ForwardPass> pass;
    std::unique_ptr<LayerOffload> offload;  // layers [0, offload->n_layers()) on a device
    std::vector<float> logits;              // n_logits rows of n_vocab
    int n_logits = 0;
    // The MTP head (Model::has_mtp): its KV cache (one layer), the main pass's final hidden rows
    // (one per logits row), the head's last pass: logits and output hidden rows.
    std::unique_ptr<KVCache> mtp_kv;
    std::vector<float> hidden, mtp_logits, mtp_hidden;
    int n_mtp = 0;
    // SessionParams::capture_layers (ascending) and what the last pass captured: one row of
    // capture_layers.size() x n_embd per token, the layers' outputs side by side.
    std::vector<int> capture_layers;
    std::vector<float> captured;
    int n_captured = 0;
    int n_ubatch;  // SessionParams::n_ubatch
    // The most tokens one pass of this session takes (n_ubatch, a ring cache's max_pass).
    int max_pass() const;

    // Throws Error (context overflow, token id out of range) before anything changes.
    void check(std::span<const token_id> tokens) const;
    // The same for an MTP head pass (and an Error naming the file when there is no head).
    void check_mtp(std::span<const token_id> next) const;
};

// One sequence's share of a pass: its tokens go to positions n_past() .. of its own cache.
struct PassSegment {
    Session::Impl* seq = nullptr;
    std::span<const token_id> tokens;
    bool all_logits = true;  // false: only the last token's logits
    int logits_row = 0;      // the first row of the session's logits this pass writes
};

// One session's share of an MTP head pass (ForwardPass::run_mtp): MTP positions mtp_n_past() ..
// of its head cache take [next[i], hidden row i].
struct MtpSegment {
    Session::Impl* seq = nullptr;
    std::span<const token_id> next;
    const float* hidden = nullptr;  // next.size() rows of n_embd
};

}  // namespace specula
