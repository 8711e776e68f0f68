// PromptCache: `serve --cache-ram N`, llama-server's bounded host-RAM prompt cache. A slot keeps
// the KV cache of its last request for the next one (scheduler.h: a prompt sharing its prefix
// skips that prefill); when the slot is given to a request that shares less with it than it holds,
// what it holds would be overwritten: it is copied into this pool instead (the target's cache and,
// with a draft model, the slot's draft cache: model/state/kv_cache.h KVSnapshot). A later request
// whose prompt shares a longer prefix with a pooled entry than with its slot gets the entry copied
// back into the slot (and taken out of the pool: the slot holds it now) and evaluates only the
// rest.
//
// Bounded by max_bytes (the rows' bytes and their tokens): the least recently used entries are
// evicted first; an entry that holds a prefix of a newer one (the same conversation, a turn
// earlier) is dropped when the newer comes in; an entry larger than the bound is not kept.
// Used by the scheduler thread only; stats() may be read from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <list>
#include <optional>
#include <span>

#include "model/state/kv_cache.h"

namespace specula {

struct PromptCacheEntry {
    KVSnapshot target;
    std::optional<KVSnapshot> draft;  // the slot's draft-model cache, when it had one
    size_t bytes() const { return target.bytes() + (draft ? draft->bytes() : 0); }
};

struct PromptCacheStats {
    long hits = 0, misses = 0, evictions = 0;
    long entries = 0;
    size_t bytes = 0, max_bytes = 0;
};

class PromptCache {
  public:
    explicit PromptCache(size_t max_bytes) : max_bytes_(max_bytes) {}

    // Keeps an entry (see the header for what is dropped to make room).
    void put(PromptCacheEntry e);
    // The entry whose target tokens share the longest prefix with `prompt`, if that is longer
    // than `have` (what the request's slot already shares with it), taken out of the pool: a hit.
    // Otherwise nothing: a miss.
    std::optional<PromptCacheEntry> take(std::span<const token_id> prompt, int have);

    PromptCacheStats stats() const;

  private:
    void count_bytes();
    size_t max_bytes_;
    std::list<PromptCacheEntry> lru_;  // most recently used first
    size_t bytes_ = 0;
    std::atomic<long> hits_{0}, misses_{0}, evictions_{0}, entries_{0};
    std::atomic<size_t> atomic_bytes_{0};
};

}  // namespace specula
