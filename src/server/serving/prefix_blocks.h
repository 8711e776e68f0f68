// PrefixBlocks: `specula serve`'s shared prompt prefixes (vLLM's automatic prefix caching, in
// whole prompt prefixes). A block is a KV cache owned by the server, not by a slot, holding the
// rows of one prompt prefix; slots read its rows in place (model/state/kv_cache.h share_prefix:
// attention gives the bits of rows of their own), so N requests with the same system prompt and
// tools hold its rows once and evaluate them once.
//
//  - Building: a request whose prompt shares too little with every block and with its slot builds
//    one: its target session evaluates prompt[0, n-1) into a new block (its one writer), its own
//    cache keeps only what comes after; with a draft model, its draft session does the same into
//    the block's draft cache.
//  - Joining: a request whose prompt shares at least min_tokens with a block's rows (more than
//    its slot holds) reads the block's first rows and evaluates only the rest of its prompt: any
//    common prefix, however much longer the block is (rows are causal: a block's first n rows
//    are those of its first n tokens, whatever follows), read in place, not copied. One
//    that shares them with a block still being built, or with a prompt admitted in the same round,
//    waits in the queue until the builder has written them: the prefix is evaluated once,
//    whatever arrives at the same time.
//  - Extending: a request whose prompt holds ALL of a block's rows (no builder) and min_tokens
//    more (a later turn of a conversation, a system prompt block and a tool list after it)
//    becomes the block's builder again: its rows past the block's go into the block, so later
//    and concurrent requests sharing them read them too. Nothing is copied; the rows others read
//    are not touched.
//  - Branching: a request that shares only part of a block (at least min_tokens) and min_tokens
//    more with another queued request (agents: the same preamble, then the same other tools)
//    builds a new block whose first rows are a copy of the shared rows (a copy once, not an
//    evaluation), and the rest as a builder: the requests behind it read that block.
//  - Immutability: a block's valid rows are never written again (the cache refuses it); its
//    builder stops adding rows when its prompt is done, cancelled or rolled back.
//  - Lifetime: the sessions reading a block hold it (shared_ptr); the KV pool counts each
//    block's rows once and evicts a block no running request reads (its idle readers are emptied
//    with it), least recently used first, like an idle slot (server/serving/kv_pool.h). At most
//    max_blocks exist: the least recently used one nothing reads is dropped to make room.
// Used by the scheduler thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/session.h"

namespace specula {

struct PrefixBlock {
    std::shared_ptr<KVCache> kv;  // positions [0, kv->n_past()) valid and immutable
    // The draft model's rows of the same prefix (null: no draft model session), evaluated by the
    // builder's draft session as it begins (speculative/drafters/draft_model_drafter.h).
    std::shared_ptr<KVCache> draft;
    std::vector<token_id> planned;     // the prompt prefix it holds once built
    const Session* builder = nullptr;  // the session writing into it, while it does
    long last_used = 0;
    // Positions it counts against the KV pool: what it will hold while being built.
    int64_t rows() const { return builder ? int64_t(planned.size()) : kv->n_past(); }
    // Sessions reading it (holding its cache), the builder included.
    long readers() const { return kv.use_count() - 1; }
};

// What a request does with the blocks.
struct PrefixPlan {
    enum Kind { none, join, build, wait, extend, branch } kind = none;
    PrefixBlock* block = nullptr;  // join / extend: the block; branch: the block copied from
    int n = 0;                     // join / extend / branch: its rows read (or copied)
};

class PrefixBlocks {
  public:
    PrefixBlocks(int min_tokens, int max_blocks) : min_(min_tokens), max_(max_blocks) {}

    // For a prompt whose first prefix.size() tokens (all but its last) are evaluated before the
    // first step, on a slot that already holds `have` of them: join the block sharing the most
    // of them (at least min_tokens, more than `have`); wait where that many are still being
    // built, or where a prompt in `starting` (admitted in this round, about to build) shares as
    // many; otherwise build, if the prompt has min_tokens beyond `have` and `have` < min_tokens.
    // A join with min_tokens of prompt beyond the block's n rows, on a slot holding less than
    // n + min_tokens of them (it evaluates what it holds past n again), becomes:
    // extend, where those are all the block's rows and nothing writes it; branch, where the
    // block holds more and a prompt in `queued` (the requests waiting, this one among them: it
    // is told apart by its data pointer) shares n + min_tokens with this one.
    PrefixPlan plan(std::span<const token_id> prefix, int have,
                    std::span<const std::vector<token_id>> starting,
                    std::span<const std::span<const token_id>> queued = {}) const;
    // Makes room for one more block (drops the least recently used block nothing reads and not
    // in `keep` when max_blocks exist); false when none can be dropped.
    bool make_room(std::span<const PrefixBlock* const> keep);
    // A new block that `builder` fills with `planned` (kv may hold a prefix of it already).
    PrefixBlock* add(std::shared_ptr<KVCache> kv, std::shared_ptr<KVCache> draft,
                     std::span<const token_id> planned, const Session* builder, long stamp);
    // `builder` writes `planned` on into b, which holds a prefix of it and has no builder.
    void extend(PrefixBlock* b, std::span<const token_id> planned, const Session* builder,
                long stamp);
    // The blocks `builder` writes are done: they hold what they hold (empty ones are dropped).
    void built(const Session* builder);
    // Drops a block (its readers must have let it go, or be about to).
    void drop(const PrefixBlock* b);

    const std::vector<std::unique_ptr<PrefixBlock>>& blocks() const { return blocks_; }
    int min_tokens() const { return min_; }

  private:
    int min_, max_;
    std::vector<std::unique_ptr<PrefixBlock>> blocks_;
};

}  // namespace specula
