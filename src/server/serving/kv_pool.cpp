// KvPool accounting: see kv_pool.h.
#include "server/serving/kv_pool.h"

#include <algorithm>

namespace specula {

int64_t pool_used(const std::vector<PoolSlot>& slots) {
    int64_t used = 0;
    for (const PoolSlot& s : slots) used += s.busy ? s.reserved : s.held;
    return used;
}

Admission plan_admission(const std::vector<PoolSlot>& slots, int target, int64_t need,
                         int64_t capacity) {
    Admission a;
    // The target's own cache becomes part of the reservation.
    int64_t used = pool_used(slots) - slots[size_t(target)].held;
    std::vector<int> idle;
    for (size_t i = 0; i < slots.size(); ++i)
        if (!slots[i].busy && int(i) != target && slots[i].held > 0) idle.push_back(int(i));
    std::stable_sort(idle.begin(), idle.end(), [&](int x, int y) {
        return slots[size_t(x)].last_used < slots[size_t(y)].last_used;
    });
    for (size_t k = 0; used + need > capacity && k < idle.size(); ++k) {
        a.evict.push_back(idle[k]);
        used -= slots[size_t(idle[k])].held;
    }
    a.fits = used + need <= capacity;
    if (!a.fits) {
        a.evict.clear();
        a.free_after = capacity - pool_used(slots);
    } else {
        a.free_after = capacity - used - need;
    }
    return a;
}

int64_t reserve_ahead(int n_ctx) {
    return std::min<int64_t>(256, std::max(n_ctx / 8, 1));
}

int64_t reservation(int64_t n_have, int64_t max_new, int lookahead, int n_ctx, int64_t ahead) {
    const int64_t gen =
        std::min(max_new > 0 ? max_new : int64_t(n_ctx), std::max<int64_t>(ahead, 0));
    return std::min<int64_t>(n_ctx, n_have + gen + std::max(lookahead, 0));
}

}  // namespace specula
