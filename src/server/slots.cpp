// Slots: see slots.h.
#include "server/slots.h"

#include <algorithm>
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
        slots.push_back(std::move(slot));
    }
    return slots;
}

SlotMatch best_slot(const std::vector<Slot*>& free, std::span<const token_id> prompt) {
    SlotMatch best{free.front(), -1};
    const size_t lim = prompt.empty() ? 0 : prompt.size() - 1;
    for (Slot* s : free) {
        const int k = s->target->common_prefix(prompt.first(lim));
        if (k > best.n_prefix) best = {s, k};
    }
    const size_t held = best.slot->target->tokens().size();
    if (best.n_prefix > 0 && (size_t(best.n_prefix) >= held || 2 * size_t(best.n_prefix) >= lim))
        return best;
    Slot* lru = *std::min_element(free.begin(), free.end(), [](const Slot* a, const Slot* b) {
        return a->last_used < b->last_used;
    });
    return {lru, lru->target->common_prefix(prompt.first(lim))};
}

}  // namespace specula
