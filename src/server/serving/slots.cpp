// Slots: see slots.h.
#include "server/serving/slots.h"

#include <algorithm>
#include <new>

#include "common/error.h"

namespace specula {

int64_t slot_held(const Slot& s) {
    int64_t n = s.target->kv_touched();
    if (s.drafter && s.drafter->session())
        n = std::max<int64_t>(n, s.drafter->session()->kv_touched());
    return n;
}

void evict_slot(Slot& s) {
    s.target->unshare();  // a prefix block it read is let go
    s.target->release_kv();
    if (Session* d = s.drafter ? s.drafter->session() : nullptr) {
        d->unshare();
        d->release_kv();
    }
}

std::vector<std::unique_ptr<Slot>> make_slots(const Model& target, int n_slots,
                                              const SessionParams& params) {
    std::vector<std::unique_ptr<Slot>> slots;
    for (int i = 0; i < n_slots; ++i) {
        auto slot = std::make_unique<Slot>();
        slot->id = i;
        try {
            slot->target = std::make_unique<Session>(target, params);
        } catch (const std::bad_alloc&) {
            fail("out of memory allocating the KV cache of slot ", i, " (context ", params.n_ctx,
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
