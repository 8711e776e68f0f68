// SlotPool: see slots.h.
#include "server/slots.h"

#include <chrono>
#include <new>

#include "common/error.h"

namespace specula {

SlotPool::SlotPool(const Model& target, int n_slots, int n_ctx, int n_threads, KVType type_k,
                   KVType type_v) {
    for (int i = 0; i < n_slots; ++i) {
        auto slot = std::make_unique<Slot>();
        slot->id = i;
        try {
            slot->target =
                std::make_unique<Session>(target, SessionParams{n_ctx, n_threads, type_k, type_v});
        } catch (const std::bad_alloc&) {
            fail("out of memory allocating the KV cache of slot ", i, " (context ", n_ctx,
                 " tokens); try a smaller -c or --parallel");
        }
        free_.push_back(slot.get());
        slots_.push_back(std::move(slot));
    }
}

std::optional<SlotPool::Lease> SlotPool::acquire(const std::function<bool()>& keep_waiting) {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return !free_.empty(); })) {
        if (!keep_waiting) continue;
        lock.unlock();
        const bool keep = keep_waiting();
        lock.lock();
        if (!keep) return std::nullopt;
    }
    Slot* s = free_.back();
    free_.pop_back();
    return Lease(*this, *s);
}

void SlotPool::release(Slot& slot) {
    {
        std::lock_guard lock(mu_);
        free_.push_back(&slot);
    }
    cv_.notify_one();
}

}  // namespace specula
