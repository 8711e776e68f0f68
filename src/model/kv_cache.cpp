// KVCache storage (see kv_cache.h).
#include "model/kv_cache.h"

#include <unistd.h>

#include <cstring>

#include "common/error.h"

namespace specula {

namespace {

double physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0.0;
}

}  // namespace

KVCache::KVCache(int n_layer, int n_ctx, int n_embd_kv)
    : n_layer_(n_layer), n_ctx_(n_ctx), n_embd_kv_(n_embd_kv) {
    if (n_ctx < 1) fail("n_ctx must be >= 1, got ", n_ctx);
    const double bytes = 2.0 * n_layer * n_ctx * n_embd_kv * sizeof(float);
    const double limit = physical_memory_bytes();
    if (limit > 0 && bytes > limit) {
        fail("n_ctx = ", n_ctx, " needs a ", bytes / (1 << 30), " GiB KV cache, more than the ",
             limit / (1 << 30), " GiB of memory");
    }
    const size_t n = static_cast<size_t>(n_layer) * n_ctx * n_embd_kv;
    k_.reset(new float[n]);
    v_.reset(new float[n]);
}

void KVCache::write(int layer, int pos, const float* k, const float* v) {
    std::memcpy(k_.get() + offset(layer, pos), k, sizeof(float) * n_embd_kv_);
    std::memcpy(v_.get() + offset(layer, pos), v, sizeof(float) * n_embd_kv_);
}

}  // namespace specula
