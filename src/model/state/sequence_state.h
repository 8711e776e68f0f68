// Internal to model/: the state of one sequence, a Session's (model/session.h): its KV cache and
// recurrent state, the logits of its last pass, what drafters take from its passes (the MTP
// head's cache and rows, the captured hidden states), the pool it runs on and its device layers.
// The pass (model/forward_pass.h) reads and writes it through its segments.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "common/threadpool.h"
#include "model/load/model.h"
#include "model/load/offload.h"
#include "model/state/kv_cache.h"
#include "model/state/recurrent_state.h"
#include "model/state/session_params.h"

namespace specula {

// The cache a model's sequence keeps, layer by layer: each layer's shape, and its window
// (KVCache's: 0 whole, n a sliding window, -1 no cache: a recurrent layer, one that reads
// another layer's cache, HParams::kv_src, or one without KV heads: nemotron_h's MLP layers);
// HParams::kv_v_is_k makes every layer's V its K (KVLayerShape::v_is_k).
std::vector<KVLayerShape> kv_shapes(const HParams& hp);
// The shape of an MTP head's one-layer cache (the main layers' KV heads; MLA's latent rows once).
KVLayerShape mtp_kv_shape(const HParams& hp);
std::vector<int> kv_windows(const HParams& hp);

struct SequenceState {
    SequenceState(const Model& m, const SessionParams& p);
    ~SequenceState();

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
    bool keep_hidden = false;  // SessionParams::keep_hidden, or the model has an MTP head
    std::vector<float> captured;
    int n_captured = 0;
    int n_ubatch;  // SessionParams::n_ubatch
    // The most tokens one pass of this session takes (n_ubatch, a ring cache's max_pass).
    int max_pass() const;

    // Throws Error (context overflow, token id out of range) before anything changes.
    void check(std::span<const token_id> tokens) const;
    // An Error naming the file when the model has no MTP head.
    void require_mtp() const;
    // The same for an MTP head pass (and an Error naming the file when there is no head).
    void check_mtp(std::span<const token_id> next) const;
};

}  // namespace specula
