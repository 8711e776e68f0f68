// KvPool: the one budget of KV positions every slot of `specula serve` draws from. The context is
// never split over the slots: each slot's Session has a cache of the whole per-sequence context
// (-c / --max-model-len), whose pages the OS commits only as rows are written
// (model/state/kv_cache.h), and the pool decides how many positions may be committed at once over
// all slots. A position here stands for one row of every layer of the target's cache and of the
// draft model's (the memory plan prices it: model/memory_plan.h).
//
// What counts against the pool:
//  - a busy slot: its reservation. Admission reserves the prompt, at most reserve_ahead() of the
//    tokens the request may generate (max_tokens, or the rest of the context) and one verify
//    pass's lookahead, at most the context; as it generates, the scheduler grows the reservation
//    by up to as much again whenever its next pass would run past it.
//  - an idle slot: the positions its cache still holds committed (its cached prefix, which a
//    later request sharing it reuses) until it is evicted to make room; eviction returns the
//    pages to the OS.
//
// Admission (plan_admission) is first come, first served: the oldest waiting request is admitted
// when its reservation fits once the idle slots other than its own are evicted (least recently
// used first); otherwise it and everything behind it wait (the scheduler bounds the wait and
// says why in the error and in /metrics). A running request whose reservation cannot grow, even
// with every idle slot evicted, takes the room of the youngest running request (vLLM's
// preemption by recompute; possibly itself): that one gives its slot and KV back and waits at
// the head of the queue, then resumes where it stopped, its rows evaluated again (or copied back
// from --cache-ram's pool). The oldest request is never preempted, so every request finishes.
#pragma once

#include <cstdint>
#include <vector>

namespace specula {

struct PoolSlot {
    bool busy = false;
    int64_t reserved = 0;  // busy: the request's reservation
    int64_t held = 0;      // idle: the positions its cache keeps committed
    long last_used = 0;    // for eviction order: least recently used first
};

struct Admission {
    bool fits = false;
    std::vector<int> evict;  // idle slots to empty first (indices into the slots given)
    int64_t free_after = 0;  // positions left free once admitted (fits) or free now (not)
};

// Positions counted against the pool now.
int64_t pool_used(const std::vector<PoolSlot>& slots);

// Whether a request needing `need` positions can start on slot `target` (an idle one; what it
// holds becomes part of the reservation) within `capacity`, and which idle slots must be emptied
// for it.
Admission plan_admission(const std::vector<PoolSlot>& slots, int target, int64_t need,
                         int64_t capacity);

// Generated positions reserved ahead of a request's next pass (see the top of this file): an
// eighth of the context, at most 256. vLLM reserves none and preempts sooner; reserving all of
// max_tokens would run requests without one (the rest of the context) one at a time in a pool
// of -c.
int64_t reserve_ahead(int n_ctx);

// The positions a request's reservation reaches: the `n_have` it holds or will evaluate (its
// prompt; resumed after a preemption, its prompt and output), up to `max_new` more generated
// tokens (<= 0: until the context is full) but at most `ahead` of them, and the rows of one
// verify pass past the end (`lookahead`); at most n_ctx.
int64_t reservation(int64_t n_have, int64_t max_new, int lookahead, int n_ctx,
                    int64_t ahead = INT64_MAX);

}  // namespace specula
