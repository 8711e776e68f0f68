// PrefixBlocks: see prefix_blocks.h.
#include "server/serving/prefix_blocks.h"

#include <algorithm>

namespace specula {

namespace {

int common(std::span<const token_id> a, std::span<const token_id> b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return int(i);
}

}  // namespace

PrefixPlan PrefixBlocks::plan(std::span<const token_id> prefix, int have,
                              std::span<const std::vector<token_id>> starting,
                              std::span<const std::span<const token_id>> queued) const {
    PrefixPlan best;
    for (const auto& b : blocks_) {
        const int c = common(b->planned, prefix);
        if (c <= best.n) continue;
        best = {PrefixPlan::join, b.get(), c};
        if (c > b->kv->n_past()) best.kind = PrefixPlan::wait;  // its builder is not there yet
    }
    for (const auto& s : starting)
        if (const int c = common(s, prefix); c > best.n) best = {PrefixPlan::wait, nullptr, c};
    const bool more = int(prefix.size()) - best.n >= min_;  // rows worth sharing beyond it
    // Extending costs this request nothing only where its slot holds no more than the block's
    // rows (a slot holding more, e.g. the previous turn of its own conversation, keeps them: the
    // rows past the block would be evaluated again, and its own cache hit would shrink to the
    // block's). A branch copies the shared rows, so it is worth it below min_ rows past them.
    if (best.kind == PrefixPlan::join && best.n >= min_ && have < best.n + min_ && more) {
        const PrefixBlock& b = *best.block;
        if (!b.builder && best.n == b.kv->n_past() && have <= best.n)
            return {PrefixPlan::extend, best.block, best.n};
        if (best.n < b.kv->n_past())
            for (const auto& q : queued)
                if (q.data() != prefix.data() && common(q, prefix) >= best.n + min_)
                    return {PrefixPlan::branch, best.block, best.n};
    }
    if (best.n >= min_ && best.n > have) return best;
    if (have < min_ && int(prefix.size()) - have >= min_) return {PrefixPlan::build, nullptr, 0};
    return {};
}

bool PrefixBlocks::make_room(std::span<const PrefixBlock* const> keep) {
    if (int(blocks_.size()) < max_) return true;
    const PrefixBlock* lru = nullptr;
    for (const auto& b : blocks_)
        if (b->readers() == 0 && std::find(keep.begin(), keep.end(), b.get()) == keep.end() &&
            (!lru || b->last_used < lru->last_used))
            lru = b.get();
    if (!lru) return false;
    drop(lru);
    return true;
}

PrefixBlock* PrefixBlocks::add(std::shared_ptr<KVCache> kv, std::shared_ptr<KVCache> draft,
                               std::span<const token_id> planned, const Session* builder,
                               long stamp) {
    auto b = std::make_unique<PrefixBlock>();
    b->kv = std::move(kv);
    b->draft = std::move(draft);
    b->planned.assign(planned.begin(), planned.end());
    b->builder = builder;
    b->last_used = stamp;
    blocks_.push_back(std::move(b));
    return blocks_.back().get();
}

void PrefixBlocks::extend(PrefixBlock* b, std::span<const token_id> planned, const Session* builder,
                          long stamp) {
    b->planned.assign(planned.begin(), planned.end());
    b->builder = builder;
    b->last_used = stamp;
}

void PrefixBlocks::built(const Session* builder) {
    for (size_t i = 0; i < blocks_.size();) {
        PrefixBlock& b = *blocks_[i];
        if (b.builder == builder) {
            b.builder = nullptr;
            b.planned.resize(size_t(b.kv->n_past()));
        }
        if (!b.builder && b.planned.empty())
            blocks_.erase(blocks_.begin() + long(i));
        else
            ++i;
    }
}

void PrefixBlocks::drop(const PrefixBlock* b) {
    blocks_.erase(
        std::find_if(blocks_.begin(), blocks_.end(), [&](const auto& x) { return x.get() == b; }));
}

}  // namespace specula
