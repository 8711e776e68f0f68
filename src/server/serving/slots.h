// Slots: the server's --parallel generation slots. Each slot owns a target Session (its own KV
// cache over the shared, read-only Model, built over the scheduler's one thread pool), its drafter,
// the adaptive draft-length state it carries from request to request, and the tokens its cache
// holds (so a request whose prompt starts with them skips that prefill). The scheduler
// (server/serving/scheduler.h) alone uses them.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "model/session.h"
#include "speculative/draft_length/draft_length.h"
#include "speculative/drafters/drafter.h"

namespace specula {

struct Slot {
    int id = 0;
    std::unique_ptr<Session> target;
    DraftLengthController draft_length;  // `--draft auto` learns on from request to request
    // The slot's drafter (draft-model Session or n-gram), made on first use and reused by every
    // request it suits: greedy ones (a sampling request gets its own, seeded from the request).
    std::unique_ptr<Drafter> drafter;
    std::atomic<bool> busy{false};  // holds a request (set and cleared by the scheduler)
    long last_used = 0;             // when a request last took it (the scheduler's counter)
    int64_t reserved = 0;  // busy: its request's KV pool reservation (server/serving/kv_pool.h)
};

// The KV positions an idle slot keeps committed (its target's and its drafter's caches), and
// emptying it: both caches reset, any prefix block they read let go, and their memory given back
// (server/serving/kv_pool.h).
int64_t slot_held(const Slot& s);
void evict_slot(Slot& s);

// Slots are created up front so that a KV cache that does not fit fails at startup (an Error
// naming the slot and the context). Each target Session gets `params` (the context, the pool,
// the shared pass buffers and page size).
std::vector<std::unique_ptr<Slot>> make_slots(const Model& target, int n_slots,
                                              const SessionParams& params);

// The slot for a prompt among `free` (not empty), and the prefix of prompt[0, n-1) (the part a
// prompt evaluates before the first step) its cache (Session::tokens) holds: the slot sharing the
// longest prefix (ties: the first) when taking it is worth it - the prompt extends everything the
// slot holds, or the shared prefix is at least half the prompt; otherwise the least recently used
// slot (an empty one first), so that a new conversation sharing a few tokens with another (a chat
// template's start) does not overwrite that conversation's cache while another slot is free.
struct SlotMatch {
    Slot* slot = nullptr;
    int n_prefix = 0;
};
SlotMatch best_slot(const std::vector<Slot*>& free, std::span<const token_id> prompt);

}  // namespace specula
