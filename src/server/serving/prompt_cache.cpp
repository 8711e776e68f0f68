// PromptCache: see prompt_cache.h.
#include "server/serving/prompt_cache.h"

#include <algorithm>

namespace specula {

namespace {

int shared_prefix(std::span<const token_id> a, std::span<const token_id> b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return int(i);
}

}  // namespace

void PromptCache::count_bytes() {
    atomic_bytes_ = bytes_;
    entries_ = long(lru_.size());
}

void PromptCache::put(PromptCacheEntry e) {
    const size_t size = e.bytes();
    if (size > max_bytes_ || e.target.tokens.empty()) return;
    const std::span<const token_id> toks(e.target.tokens);
    for (auto it = lru_.begin(); it != lru_.end();) {  // an older turn of the same conversation
        if (it->target.tokens.size() <= toks.size() &&
            shared_prefix(it->target.tokens, toks) == int(it->target.tokens.size())) {
            bytes_ -= it->bytes();
            it = lru_.erase(it);
        } else {
            ++it;
        }
    }
    while (!lru_.empty() && bytes_ + size > max_bytes_) {
        bytes_ -= lru_.back().bytes();
        lru_.pop_back();
        ++evictions_;
    }
    bytes_ += size;
    lru_.push_front(std::move(e));
    count_bytes();
}

std::optional<PromptCacheEntry> PromptCache::take(std::span<const token_id> prompt, int have) {
    // The last prompt token is always evaluated (its logits start the generation).
    const std::span<const token_id> p = prompt.empty() ? prompt : prompt.first(prompt.size() - 1);
    auto best = lru_.end();
    int best_len = have;
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
        const int k = shared_prefix(it->target.tokens, p);
        if (k > best_len) {
            best_len = k;
            best = it;
        }
    }
    if (best == lru_.end()) {
        ++misses_;
        return std::nullopt;
    }
    ++hits_;
    PromptCacheEntry e = std::move(*best);
    bytes_ -= e.bytes();
    lru_.erase(best);
    count_bytes();
    return e;
}

PromptCacheStats PromptCache::stats() const {
    PromptCacheStats s;
    s.hits = hits_;
    s.misses = misses_;
    s.evictions = evictions_;
    s.entries = entries_;
    s.bytes = atomic_bytes_;
    s.max_bytes = max_bytes_;
    return s;
}

}  // namespace specula
