// Scheduler (server/serving/scheduler.h): its KV pool side (server/serving/kv_pool.h): what a
// request reserves, the slots and prefix blocks as the pool counts them, admission with eviction,
// the gauges; and a slot's prefix block (server/serving/prefix_blocks.h), joined or built.
#include <algorithm>
#include <cstdio>

#include "server/serving/kv_pool.h"
#include "server/serving/scheduler.h"
#include "speculative/draft_length/draft_length.h"

namespace specula {

int64_t Scheduler::need(const Job& j) const {
    const int draft =
        std::max({j.gen.n_draft, j.gen.n_forced, j.draft_auto ? DraftLengthParams{}.n_max : 0});
    return reservation(int64_t(j.prompt.size()), j.gen.n_predict, draft + 1,
                       slots_[0]->target->n_ctx());
}

std::vector<PoolSlot> Scheduler::pool_slots() const {
    std::vector<PoolSlot> ps;
    for (const auto& s : slots_)
        ps.push_back({s->busy.load(), s->reserved, s->busy ? 0 : slot_held(*s), s->last_used});
    if (!prefixes_) return ps;
    for (const auto& b : prefixes_->blocks()) {
        bool busy =
            b->builder || std::find(pinned_.begin(), pinned_.end(), b.get()) != pinned_.end();
        for (const auto& s : slots_) busy = busy || (s->busy && s->target->kv().base() == b->kv);
        ps.push_back({busy, b->rows(), busy ? 0 : b->rows(), b->last_used});
    }
    return ps;
}

void Scheduler::evict_entry(std::span<const int> which) {
    std::vector<const PrefixBlock*> blocks;
    for (int i : which) {
        if (i < int(slots_.size())) {
            evict_slot(*slots_[size_t(i)]);
            continue;
        }
        const PrefixBlock* b = prefixes_->blocks()[size_t(i) - slots_.size()].get();
        for (auto& s : slots_)  // its readers are idle: they are emptied with it
            if (s->target->kv().base() == b->kv) evict_slot(*s);
        blocks.push_back(b);
    }
    for (const PrefixBlock* b : blocks) prefixes_->drop(b);
}

bool Scheduler::fits_pool(const Job& job, Slot& slot, const PrefixPlan& plan) {
    std::vector<PoolSlot> ps = pool_slots();
    int target = 0;
    while (slots_[size_t(target)].get() != &slot) ++target;
    int64_t n = need(job);
    // The block it reads (joins, or its slot reads for the prefix it keeps) is counted once, as the
    // block's, and stays.
    const PrefixBlock* keep = plan.kind == PrefixPlan::join ? plan.block : nullptr;
    int kept = plan.kind == PrefixPlan::join ? plan.n : 0;
    if (prefixes_ && !keep && slot.target->shared_prefix() > 0) {
        const std::span<const token_id> p(job.prompt.data(), job.prompt.size() - 1);
        kept = std::min(slot.target->common_prefix(p), slot.target->shared_prefix());
        for (const auto& b : prefixes_->blocks())
            if (kept > 0 && b->kv == slot.target->kv().base()) keep = b.get();
    }
    if (keep) {
        n = std::max<int64_t>(0, n - kept);
        for (size_t i = 0; i < prefixes_->blocks().size(); ++i)
            if (prefixes_->blocks()[i].get() == keep) {
                PoolSlot& e = ps[slots_.size() + i];
                e.busy = true;  // reserved: its rows
                e.held = 0;
            }
    }
    const Admission a = plan_admission(ps, target, n, cfg_.kv_pool);
    if (!a.fits) return false;
    evict_entry(a.evict);
    slot.reserved = n;
    std::lock_guard lk(pool_mu_);
    pool_state_.evictions += long(a.evict.size());
    return true;
}

void Scheduler::pool_timeout(Job& j) {
    const int64_t used = pool_used(pool_slots());
    {
        std::lock_guard lk(j.mu);
        char waited[32];
        std::snprintf(waited, sizeof waited, "%g", cfg_.kv_wait_s);
        j.error = std::string("the KV pool stayed full for ") + waited +
                  " s (--kv-wait-timeout): this request needs " + std::to_string(need(j)) +
                  " of its " + std::to_string(cfg_.kv_pool) + " positions and " +
                  std::to_string(used) +
                  " are held by running requests; retry later, or start the server with a "
                  "larger --kv-pool (or a smaller max_tokens)";
        j.error_code = "kv_pool_full";
        j.done = true;
        j.cv.notify_all();
    }
    std::lock_guard lk(pool_mu_);
    ++pool_state_.timeouts;
}

void Scheduler::update_pool_state(int waiting) {
    int64_t used = 0, cached = 0, shared = 0;
    long readers = 0;
    for (const PoolSlot& s : pool_slots()) (s.busy ? used : cached) += s.busy ? s.reserved : s.held;
    if (prefixes_)
        for (const auto& b : prefixes_->blocks()) {
            shared += b->kv->n_past();
            readers += b->readers();
        }
    std::lock_guard lk(pool_mu_);
    pool_state_.used = used;
    pool_state_.cached = cached;
    pool_state_.shared = shared;
    pool_state_.shared_readers = readers;
    pool_state_.shared_blocks = prefixes_ ? long(prefixes_->blocks().size()) : 0;
    if (waiting >= 0) pool_state_.waiting = waiting;
}

KvPoolGauges Scheduler::pool_state() const {
    std::lock_guard lk(pool_mu_);
    return pool_state_;
}

void Scheduler::share_prefix(Slot& slot, Drafter* drafter, std::span<const token_id> prompt,
                             const PrefixPlan& plan) {
    Session& t = *slot.target;
    Session* d = drafter ? drafter->session() : nullptr;
    if (d && !d->can_snapshot()) d = nullptr;
    const std::span<const token_id> p = prompt.first(prompt.size() - 1);
    const int have = t.common_prefix(p);  // the slot's own, or the prompt cache's
    if (plan.kind == PrefixPlan::join && plan.n > have) {
        t.share_prefix(plan.block->kv, plan.n);
        // The draft session reads the block's draft rows and catches up from there (resume).
        if (d && plan.block->draft && d->common_prefix(p) < plan.n)
            d->share_prefix(plan.block->draft, std::min(plan.n, plan.block->draft->n_past()));
        plan.block->last_used = ++slot_uses_;
    } else if (plan.kind == PrefixPlan::build && have < prefixes_->min_tokens() &&
               prefixes_->make_room(pinned_)) {  // a block joined in this round stays
        std::shared_ptr<KVCache> kv = t.new_prefix_block();
        std::shared_ptr<KVCache> dkv = d ? d->new_prefix_block() : nullptr;
        prefixes_->add(kv, dkv, p, &t, ++slot_uses_);
        t.share_prefix(std::move(kv), int(p.size()));
        // The draft session evaluates the prompt into its block as the drafter begins.
        if (d) d->share_prefix(std::move(dkv), int(p.size()));
        // The block counts the prompt's rows from now on.
        slot.reserved = std::max<int64_t>(0, slot.reserved - int64_t(p.size()));
    }
}

}  // namespace specula
