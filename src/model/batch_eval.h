// BatchEvaluator: ONE forward pass over tokens of several Sessions of the same model. Each
// session keeps its own KV cache, positions (its tokens go to n_past() .. of its own cache), causal
// mask and all_logits choice; every weight is streamed once for all rows of the pass. Afterwards
// each session reads its logits as after its own Session::eval (logits(i), n_logits()), and rolls
// back on its own.
//
// Promise: a sequence's logits are bit-identical to evaluating its tokens alone with
// Session::eval, whatever other sequences share the pass (matmuls are batch invariant per row,
// attention runs per sequence over its own cache, everything else is per row).
//
// Threads: the pass runs on the evaluator's pool (typically the one the sessions were built over,
// SessionParams::pool). Not thread-safe: one eval at a time, and never concurrently with an eval
// of one of its sessions on the same pool.
#pragma once

#include <memory>
#include <span>

#include "common/threadpool.h"
#include "model/session.h"

namespace specula {

struct BatchItem {
    Session* session = nullptr;
    std::span<const token_id> tokens;  // may be empty: the session is left as it is
    bool all_logits = true;            // false: only the last token's logits (a prompt chunk)
};

// One session's rows of an MTP head pass: Session::eval_mtp(next, hidden)'s arguments.
struct MtpItem {
    Session* session = nullptr;
    std::span<const token_id> next;  // may be empty: the session's head is left as it is
    const float* hidden = nullptr;   // next.size() rows of n_embd
};

class BatchEvaluator {
  public:
    BatchEvaluator(const Model& model, ThreadPool& pool);
    ~BatchEvaluator();
    BatchEvaluator(const BatchEvaluator&) = delete;
    BatchEvaluator& operator=(const BatchEvaluator&) = delete;

    // Evaluates every item's tokens in one pass. Throws Error, before any session changes, when
    // a session is null, of another model or listed twice, or an item would overflow its context
    // or holds a token id out of range (naming the item). An item with no tokens leaves its
    // session's cache as it is and its n_logits() at 0. An item longer than its session's
    // sliding-window pass (SessionParams::swa_max_pass) is evaluated on its own by Session::eval
    // (the same logits).
    void eval(std::span<const BatchItem> items);

    // The MTP head (Session::eval_mtp) over every item's rows in ONE pass: each session's
    // mtp_logits / mtp_hidden are bit-identical to its own eval_mtp's (the head's matmuls are
    // batch invariant per row, its attention reads only the session's own head cache). Throws
    // Error, before any session changes, when a session is null, of another model or listed
    // twice, the model has no head, or an item would overflow its head cache or holds a token
    // id out of range (naming the item). Sessions with a device offload take part as any other
    // (the head runs on the CPU).
    void eval_mtp(std::span<const MtpItem> items);

    const Model& model() const { return model_; }
    ThreadPool& pool() { return pool_; }

  private:
    struct State;
    const Model& model_;
    ThreadPool& pool_;
    std::unique_ptr<State> state_;
};

}  // namespace specula
