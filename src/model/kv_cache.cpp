// KVCache storage (see kv_cache.h).
#include "model/kv_cache.h"

namespace specula {

KVCache::KVCache(int n_layer, int n_ctx, int n_embd_kv)
    : n_layer_(n_layer), n_ctx_(n_ctx), n_embd_kv_(n_embd_kv) {
    const size_t n = static_cast<size_t>(n_layer) * n_ctx * n_embd_kv;
    k_.assign(n, 0.f);
    v_.assign(n, 0.f);
}

}  // namespace specula
