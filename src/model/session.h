// A Session: one sequence evaluated on a Model, with its own KV cache and the logits of its last
// eval, numerically following llama.cpp's CPU graph.
//
// Promises:
//  - Session::eval is batch invariant: the logits of a position are bit-identical whether its
//    token was evaluated alone or together with others, so speculative verification can run a
//    whole draft in one pass.
//  - After warm-up (the first eval of the largest batch size) eval allocates nothing.
//  - Several sessions of one model can be evaluated in ONE pass (model/batch_eval.h); a
//    sequence's logits are bit-identical to evaluating it alone.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "model/load/model.h"
#include "model/state/kv_cache.h"
#include "model/state/session_params.h"

namespace specula {

// Pass buffers for SessionParams::shared_pass: one per model and thread pool.
std::shared_ptr<ForwardPass> make_shared_pass(const Model& model);

// One sequence's state: KV cache and the logits of the last eval. Not thread-safe; many sessions
// may share one Model.
class Session {
  public:
    Session(const Model& model, const SessionParams& params);
    ~Session();
    Session(Session&&) noexcept;
    Session& operator=(Session&&) noexcept;

    // Evaluates tokens at positions n_past() .. n_past()+n-1 in ONE pass (each weight streamed
    // once for all of them) and appends them to the cache. Afterwards logits(i) holds the n_vocab
    // logits after token i. A position's logits do not depend on how many tokens shared the pass.
    // Throws Error if the context would overflow (naming n_ctx) or a token id is out of range;
    // the session is unchanged then.
    // With all_logits = false only the last token's logits are computed and kept (n_logits() ==
    // 1, logits(0) is the last token's): a prompt then skips the n_vocab-wide output matmul for
    // every other position, and no buffer of n_vocab floats per prompt row exists. That row is
    // bit-identical to the all_logits one. More than SessionParams::n_ubatch tokens are evaluated
    // in several passes (the same logits).
    void eval(std::span<const token_id> tokens, bool all_logits = true);

    const float* logits(int i) const;
    int n_logits() const;  // tokens of the last eval
    int n_past() const;
    // The token at each cached position [0, n_past()): what eval appended, less what rollback
    // dropped. The one record of what a cache holds (prefix reuse reads it).
    std::span<const token_id> tokens() const;
    // Length of the longest prefix `t` shares with tokens().
    int common_prefix(std::span<const token_id> t) const;
    int n_ctx() const;
    int n_threads() const;
    // The pool this session's passes run on (a drafter's own small passes between the target's
    // run on it too: speculative/drafters/eagle3.h).
    ThreadPool& pool() const;
    // Layers this session runs on a device (0: all on the CPU; model/load/offload.h).
    int n_gpu_layers() const;
    // Drops cache entries at positions >= n_past (speculative rollback). n_past <= n_past().
    // A model with sliding-window layers: Error when n_past is more than
    // SessionParams::swa_max_pass positions back (those layers no longer hold what it needs);
    // common_prefix() never reports such a prefix. A hybrid model (recurrent layers): Error
    // when n_past is before the last eval's pass (or inside a pass of more than
    // RecurrentState::kKeepMax tokens), unless 0; the state is then exactly as after position
    // n_past - 1 (model/state/recurrent_state.h), and common_prefix() reports only such positions.
    // The logits of the last eval stay readable (a verifier samples from them after rollback).
    void rollback(int n_past);
    // rollback(0): a session building a prefix block from position 0 keeps building it.
    void reset() { rollback(0); }
    // Whether rollback(n_past) is possible.
    bool can_rollback(int n_past) const;

    // The host-RAM prompt cache's way in and out (server/serving/prompt_cache.h): whether this
    // session's whole KV cache lives in host memory as plain rows (no device layers, no
    // sliding-window rings), a copy of its cached positions [0, n_past()), and making it hold a
    // copy again (the logits are stale until the next eval; the copy out runs on the session's
    // pool). restore throws Error for a snapshot of another shape.
    bool can_snapshot() const;
    KVSnapshot snapshot() const;
    void restore(const KVSnapshot& s);

    // --- Shared prefixes (server/serving/prefix_blocks.h): can_snapshot() sessions only ---
    // An empty cache of this session's shape, types and context on 4 KiB pages: a prefix block
    // that sessions read at once (model/state/kv_cache.h share_prefix).
    std::shared_ptr<KVCache> new_prefix_block() const;
    // Resets the session and makes positions [0, limit) those of `block`: it then holds the
    // block's first min(limit, block->n_past()) positions without evaluating them, and evaluates
    // the rest of [0, limit) into the block (whose one writer it must be). The logits are stale
    // until the next eval. Error where !can_snapshot() or for a block of another shape.
    void share_prefix(std::shared_ptr<KVCache> block, int limit);
    // Positions [0, shared_prefix()) are read from a block (0: none); a rollback below shrinks it.
    int shared_prefix() const;
    // Holds nothing and reads no block any more.
    void unshare();

    const Model& model() const;
    // What this session's pass buffers and kept logits (and MTP hidden rows) take now, in bytes:
    // they grow to the largest pass seen; the memory plan's per-sequence "passes" figure bounds
    // them (model/memory_plan.h).
    double buffer_bytes() const;
    // The positions of the KV cache written since it was made or last released: those whose
    // memory is committed (model/state/kv_cache.h's touched(); with an MTP head, the more of its
    // two caches; positions of a shared prefix are the block's, not counted). release_kv gives back
    // the memory of the positions >= n_past() (rows a rollback or reset left), on 4 KiB pages
    // exactly (SessionParams::kv_small_pages).
    int kv_touched() const;
    void release_kv();

    // The final hidden state of logits row i of the last eval, after the output norm (the output
    // matmul's input: what the MTP head takes, in ik_llama.cpp and vLLM too, and Medusa's
    // heads); kept for a model with an MTP head and with SessionParams::keep_hidden (an Error
    // naming the file otherwise).
    const float* hidden(int i) const;

    // --- The MTP head (model().has_mtp(); each call is an Error naming the file otherwise) ---
    // One pass of the MTP head over rows t = 0 .. next.size() - 1: row t takes token next[t] and
    // the hidden state hidden + t * n_embd (h_p: the main pass's, or for chained drafts the
    // head's own mtp_hidden) at MTP position mtp_n_past() + t, and is appended to the head's own
    // KV cache. MTP position p holds [t_{p+1}, h_p]: its logits predict t_{p+2}. Several
    // sessions' head rows go in one pass with BatchEvaluator::eval_mtp (the same results).
    void eval_mtp(std::span<const token_id> next, const float* hidden);
    const float* mtp_logits(int t) const;  // row t of the last eval_mtp
    const float* mtp_hidden(int t) const;  // its output hidden state (after shared_head_norm)
    int mtp_n_past() const;
    // Keeps MTP positions [0, n) (n <= mtp_n_past()). rollback() leaves the head's cache alone:
    // its user (speculative/drafters/mtp_drafter.h) decides which positions stay.
    void mtp_rollback(int n);

    // --- What a drafter reads of the target (speculative/) ---
    // Row t of the last pass's captured hidden states (SessionParams::capture_layers): the
    // outputs of those layers at the pass's token t, side by side in ascending layer order,
    // n_embd values each. n_captured() rows: every token of the last pass (an eval of more than
    // n_ubatch tokens runs several: a caller that needs every row evaluates at most n_ubatch
    // tokens at a time, so the memory stays one pass's). Error when the session captures
    // nothing or t is out of range.
    const float* captured(int t) const;
    int n_captured() const;
    int capture_width() const;  // floats per captured row: capture_layers.size() x n_embd
    // The KV cache, read-only: a drafter that attends over the target's keys and values (Gemma
    // 4's assistant) reads rows [0, n_past()) of the layer ArchSpec::kv_source_layer names.
    const KVCache& kv() const;

  private:
    friend class BatchEvaluator;           // model/batch_eval.h: one pass over several sessions
    std::unique_ptr<SequenceState> impl_;  // model/state/sequence_state.h
};

}  // namespace specula
