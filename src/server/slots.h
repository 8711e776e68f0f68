// SlotPool: the server's --parallel generation slots. Each slot owns a target Session (its own KV
// cache over the shared, read-only Model), its drafter and the adaptive draft-length state it
// carries from request to request. acquire() blocks while all slots are busy (requests queue; the
// order among waiters is the condition variable's) and returns a lease that gives the slot back
// when it goes out of scope.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "model/model.h"
#include "speculative/draft_length.h"
#include "speculative/drafter.h"

namespace specula {

struct Slot {
    int id = 0;
    std::unique_ptr<Session> target;
    DraftLengthController draft_length;  // `--draft auto` learns on from request to request
    // The slot's drafter (draft-model Session or n-gram), made on first use and reused by every
    // request it suits: greedy ones (a sampling request gets its own, seeded from the request).
    std::unique_ptr<Drafter> drafter;
};

class SlotPool {
  public:
    // Slots are created up front so that a KV cache that does not fit fails at startup.
    SlotPool(const Model& target, int n_slots, int n_ctx, int n_threads,
             KVType type_k = KVType::F32, KVType type_v = KVType::F32);

    class Lease {
      public:
        Lease(SlotPool& pool, Slot& slot) : pool_(&pool), slot_(&slot) {}
        Lease(Lease&& o) noexcept : pool_(o.pool_), slot_(o.slot_) { o.pool_ = nullptr; }
        Lease(const Lease&) = delete;
        ~Lease() {
            if (pool_) pool_->release(*slot_);
        }
        Slot& operator*() const { return *slot_; }
        Slot* operator->() const { return slot_; }

      private:
        SlotPool* pool_;
        Slot* slot_;
    };

    // Waits for a free slot. While waiting, `keep_waiting` (when given) is asked every 100 ms;
    // when it says no (the client left), gives up and returns nothing.
    std::optional<Lease> acquire(const std::function<bool()>& keep_waiting = {});
    int size() const { return int(slots_.size()); }

  private:
    void release(Slot& slot);

    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<Slot*> free_;
    std::mutex mu_;
    std::condition_variable cv_;
};

}  // namespace specula
