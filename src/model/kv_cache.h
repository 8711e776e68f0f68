// The F32 key/value cache of one sequence: for every layer, n_ctx rows of n_embd_kv floats for K
// (stored after RoPE) and for V, allocated once (left uninitialised, so untouched rows cost no
// memory). Rows [0, n_past) are valid; rollback simply lowers n_past, since later evals
// overwrite rows in place. The constructor throws Error when the cache would not fit in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace specula {

class KVCache {
  public:
    KVCache(int n_layer, int n_ctx, int n_embd_kv);

    // Stores the K row (after RoPE) and the V row of `pos` in `layer` (n_embd_kv floats each).
    void write(int layer, int pos, const float* k, const float* v);

    const float* k(int layer, int pos) const { return k_.get() + offset(layer, pos); }
    const float* v(int layer, int pos) const { return v_.get() + offset(layer, pos); }

    int n_layer() const { return n_layer_; }
    int n_ctx() const { return n_ctx_; }
    int n_embd_kv() const { return n_embd_kv_; }
    int n_past() const { return n_past_; }
    void set_n_past(int n) { n_past_ = n; }

  private:
    size_t offset(int layer, int pos) const {
        return (static_cast<size_t>(layer) * n_ctx_ + pos) * n_embd_kv_;
    }
    int n_layer_, n_ctx_, n_embd_kv_;
    int n_past_ = 0;
    std::unique_ptr<float[]> k_, v_;
};

}  // namespace specula
