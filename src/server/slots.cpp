// Slots: see slots.h.
#include "server/slots.h"

#include <new>

#include "common/error.h"

namespace specula {

std::vector<std::unique_ptr<Slot>> make_slots(const Model& target, int n_slots, int n_ctx,
                                              ThreadPool& pool, KVType type_k, KVType type_v) {
    std::vector<std::unique_ptr<Slot>> slots;
    for (int i = 0; i < n_slots; ++i) {
        auto slot = std::make_unique<Slot>();
        slot->id = i;
        try {
            SessionParams sp{n_ctx, 0};
            sp.pool = &pool;
            sp.type_k = type_k;
            sp.type_v = type_v;
            slot->target = std::make_unique<Session>(target, sp);
        } catch (const std::bad_alloc&) {
            fail("out of memory allocating the KV cache of slot ", i, " (context ", n_ctx,
                 " tokens); try a smaller -c or --parallel");
        }
        slot->cached.reserve(size_t(n_ctx));
        slots.push_back(std::move(slot));
    }
    return slots;
}

SlotMatch best_slot(const std::vector<Slot*>& free, std::span<const token_id> prompt) {
    SlotMatch best{free.front(), -1};
    const size_t lim = prompt.empty() ? 0 : prompt.size() - 1;
    for (Slot* s : free) {
        size_t k = 0;
        const size_t n = std::min(lim, s->cached.size());
        while (k < n && s->cached[k] == prompt[k]) ++k;
        if (int(k) > best.n_prefix) best = {s, int(k)};
    }
    return best;
}

}  // namespace specula
