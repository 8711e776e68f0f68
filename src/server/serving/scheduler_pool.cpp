// Scheduler (server/serving/scheduler.h): its KV pool side (server/serving/kv_pool.h): what a
// request reserves, the slots and prefix blocks as the pool counts them, admission with eviction,
// the gauges; and a slot's prefix block (server/serving/prefix_blocks.h), joined or built.
#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "server/serving/kv_pool.h"
#include "server/serving/scheduler.h"
#include "server/serving/slots.h"
#include "speculative/draft_length/draft_length.h"

namespace specula {

namespace {

int common_tokens(std::span<const token_id> a, std::span<const token_id> b) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    return int(i);
}

}  // namespace

int Scheduler::lookahead(const Job& j) const {
    return std::max({j.gen.n_draft, j.gen.n_forced, j.draft_auto ? DraftLengthParams{}.n_max : 0}) +
           1;
}

int64_t Scheduler::need(const Job& j, size_t n_out) const {
    const int n_ctx = slots_[0]->target->n_ctx();
    const int64_t left = j.gen.n_predict > 0
                             ? std::max<int64_t>(1, j.gen.n_predict - int64_t(n_out))
                             : 0;  // until the context is full
    return reservation(int64_t(j.prompt.size() + n_out), left, lookahead(j), n_ctx,
                       reserve_ahead(n_ctx));
}

int64_t Scheduler::full_need(const Job& j) const {
    return reservation(int64_t(j.prompt.size()), j.gen.n_predict, lookahead(j),
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

bool Scheduler::fits_pool(std::span<const token_id> prompt, int64_t n, Slot& slot,
                          const PrefixPlan& plan) {
    std::vector<PoolSlot> ps = pool_slots();
    const int target = slot.id;
    // The block it reads (joins, or its slot reads for the prefix it keeps) is counted once, as the
    // block's, and stays.
    // A branch's block is copied from, so it stays too; its rows are the new block's, counted.
    const bool reads = plan.kind == PrefixPlan::join || plan.kind == PrefixPlan::extend;
    const PrefixBlock* keep = reads || plan.kind == PrefixPlan::branch ? plan.block : nullptr;
    int kept = reads ? plan.n : 0;
    if (prefixes_ && !keep && slot.target->shared_prefix() > 0) {
        const std::span<const token_id> p = prompt.first(prompt.size() - 1);
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

void Scheduler::grow_reservations() {
    const int n_ctx = slots_[0]->target->n_ctx();
    bool changed = false;
    for (size_t i = 0; i < active_.size(); ++i) {
        Active& a = *active_[i];
        if (!a.seq.decoding || a.seq.done()) continue;  // a prompt is reserved whole
        const int64_t want =
            std::min<int64_t>(n_ctx, int64_t(a.seq.history.size()) + lookahead(*a.job));
        if (want <= a.reach) continue;
        const int64_t ahead = std::min(a.full, want + reserve_ahead(n_ctx));
        for (;;) {
            const std::vector<PoolSlot> ps = pool_slots();
            int64_t to = ahead;
            Admission ad = plan_admission(ps, a.slot->id, to - a.reach, cfg_.kv_pool);
            if (!ad.fits) {  // the next pass's rows alone
                to = want;
                ad = plan_admission(ps, a.slot->id, to - a.reach, cfg_.kv_pool);
            }
            changed = true;
            if (ad.fits) {
                evict_entry(ad.evict);
                a.slot->reserved += to - a.reach;
                a.reach = to;
                std::lock_guard lk(pool_mu_);
                pool_state_.evictions += long(ad.evict.size());
                break;
            }
            const size_t youngest = active_.size() - 1;
            preempt(youngest);
            if (youngest == i) break;  // it was the youngest itself
        }
    }
    if (changed) update_pool_state();
}

void Scheduler::preempt(size_t i) {
    std::unique_ptr<Active> a = std::move(active_[i]);
    active_.erase(active_.begin() + long(i));
    Slot& s = *a->slot;
    Session& t = *s.target;
    Session* d = a->seq.drafter ? a->seq.drafter->session() : nullptr;
    // --cache-ram keeps its rows: resuming copies them back rather than evaluating them again.
    if (cfg_.prompt_cache && t.can_snapshot() && t.n_past() > 0) {
        PromptCacheEntry e{t.snapshot(), std::nullopt};
        if (d && d->can_snapshot() && d->n_past() > 0) e.draft = d->snapshot();
        cfg_.prompt_cache->put(std::move(e));
    }
    if (prefixes_) prefixes_->built(&t);  // a block it was building holds what it holds
    evict_slot(s);
    if (Session* own = a->own_drafter ? a->own_drafter->session() : nullptr) {
        own->unshare();
        own->release_kv();
    }
    if (cfg_.metrics) cfg_.metrics->set_kv_tokens(s.id, 0);
    s.reserved = 0;
    s.busy = false;
    a->slot = nullptr;
    a->seq.decoding = false;
    {
        std::lock_guard lk(pool_mu_);
        ++pool_state_.preemptions;
    }
    count_waiting(true);
    {
        std::lock_guard lock(mu_);
        free_.push_back(&s);
    }
    // In arrival order: the oldest resumes first.
    auto at = std::find_if(preempted_.begin(), preempted_.end(),
                           [&](const auto& p) { return p->job->t_arrival > a->job->t_arrival; });
    preempted_.insert(at, std::move(a));
}

bool Scheduler::resume_preempted() {
    while (!preempted_.empty()) {
        Active& a = *preempted_.front();
        Sequence& q = a.seq;
        const Job& j = *a.job;
        if (j.cancel) {
            drop_preempted(a);
            preempted_.pop_front();
            continue;
        }
        Slot* slot = nullptr;
        {
            std::lock_guard lock(mu_);
            if (free_.empty()) return false;
            slot = best_slot(free_, q.history).slot;
        }
        const int64_t n = need(j, q.output.size());
        if (!fits_pool(q.history, n, *slot, PrefixPlan{})) return false;
        {
            std::lock_guard lock(mu_);
            free_.erase(std::find(free_.begin(), free_.end(), slot));
        }
        slot->busy = true;
        slot->last_used = ++slot_uses_;
        count_waiting(false);
        std::unique_ptr<Active> p = std::move(preempted_.front());
        preempted_.pop_front();
        p->slot = slot;
        p->reach = n;
        q.target = slot->target.get();
        q.drafter =
            p->own_drafter ? p->own_drafter.get() : drafter_for(*slot, j.sampling, p->own_drafter);
        q.auto_length = j.draft_auto ? &slot->draft_length : nullptr;
        if (cfg_.prompt_cache) use_prompt_cache(*slot, q.drafter, q.history, PrefixPlan{});
        {
            std::lock_guard lk(p->job->mu);
            p->job->slot_id = slot->id;
        }
        active_.push_back(std::move(p));
        try {
            engine_.resume(q);  // within the context: it was running (Engine::step's stop)
        } catch (const std::exception& e) {  // not expected: the request ends with the error
            {
                std::lock_guard lk(active_.back()->job->mu);
                active_.back()->job->error = e.what();
            }
            finish(*active_.back(), "callback");
            active_.pop_back();
        }
    }
    return true;
}

void Scheduler::drop_preempted(Active& a) {
    a.seq.stats.stop_reason = "callback";
    count_waiting(false);
    complete(a);
}

void Scheduler::count_waiting(bool preempted) {
    if (!cfg_.metrics) return;
    cfg_.metrics->add_running(preempted ? -1 : 1);
    cfg_.metrics->add_waiting(preempted ? 1 : -1);
}

void Scheduler::pool_timeout(Job& j) {
    const int64_t used = pool_used(pool_slots());
    {  // counted before the job is answered: a client that reads /metrics next sees it
        std::lock_guard lk(pool_mu_);
        ++pool_state_.timeouts;
    }
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
    PrefixBlock* b = plan.block;
    const int worth = plan.n + prefixes_->min_tokens();  // prefix_blocks.h: plan()
    if (plan.kind == PrefixPlan::extend && have < worth && !b->builder &&
        b->kv->n_past() == plan.n) {
        // Its rows past the block's go into the block (the rows others read stay as they are).
        prefixes_->extend(b, p, &t, ++slot_uses_);
        t.share_prefix(b->kv, int(p.size()));
        if (d && b->draft && d->common_prefix(p) <= b->draft->n_past())
            d->share_prefix(b->draft, int(p.size()));
        slot.reserved = std::max<int64_t>(0, slot.reserved - int64_t(p.size()) + plan.n);
    } else if (plan.kind == PrefixPlan::branch && have < worth && prefixes_->make_room(pinned_)) {
        // A new block: a copy of the rows it shares with b (not evaluated again), then its own.
        std::shared_ptr<KVCache> kv = t.new_prefix_block();
        kv->restore(b->kv->save(plan.n));
        std::shared_ptr<KVCache> dkv = d ? d->new_prefix_block() : nullptr;
        if (dkv && b->draft) dkv->restore(b->draft->save(std::min(plan.n, b->draft->n_past())));
        new_block(slot, d, p, std::move(kv), std::move(dkv));
    } else if ((plan.kind == PrefixPlan::join || plan.kind == PrefixPlan::extend ||
                plan.kind == PrefixPlan::branch) &&
               plan.n > have) {  // read its first rows
        t.share_prefix(b->kv, plan.n);
        // The draft session reads the block's draft rows and catches up from there (resume).
        if (d && b->draft && d->common_prefix(p) < plan.n)
            d->share_prefix(b->draft, std::min(plan.n, b->draft->n_past()));
        b->last_used = ++slot_uses_;
    } else if (plan.kind == PrefixPlan::build && have < prefixes_->min_tokens()) {
        // The few rows the slot holds of a block (a chat template's start) do not keep it.
        if (t.shared_prefix() > 0) t.reset();
        if (prefixes_->make_room(pinned_))  // a block joined in this round stays
            new_block(slot, d, p, t.new_prefix_block(), d ? d->new_prefix_block() : nullptr);
    }
}

bool Scheduler::block_from_cache(Slot& slot, Drafter* drafter, std::span<const token_id> p,
                                 const PromptCacheEntry& hit) {
    const int n = common_tokens(hit.target.tokens, p);
    Session& t = *slot.target;
    if (n < prefixes_->min_tokens()) return false;
    if (t.shared_prefix() > 0) t.reset();  // the block it read does not keep it (it gets the hit)
    if (!prefixes_->make_room(pinned_)) return false;
    Session* d = drafter ? drafter->session() : nullptr;
    if (d && !d->can_snapshot()) d = nullptr;
    std::shared_ptr<KVCache> kv = t.new_prefix_block();
    kv->restore(hit.target);
    kv->truncate(n);  // the rows past what the prompt shares are not the block's
    kv->release_unused();
    std::shared_ptr<KVCache> dkv = d ? d->new_prefix_block() : nullptr;
    if (dkv && hit.draft) {
        try {
            dkv->restore(*hit.draft);
            dkv->truncate(std::min(n, common_tokens(hit.draft->tokens, p)));
            dkv->release_unused();
        } catch (const Error&) {  // another draft shape: the draft session evaluates its rows
            dkv = d->new_prefix_block();
        }
    }
    new_block(slot, d, p, std::move(kv), std::move(dkv));
    return true;
}

void Scheduler::new_block(Slot& slot, Session* d, std::span<const token_id> p,
                          std::shared_ptr<KVCache> kv, std::shared_ptr<KVCache> dkv) {
    Session& t = *slot.target;
    prefixes_->add(kv, dkv, p, &t, ++slot_uses_);
    t.share_prefix(std::move(kv), int(p.size()));
    // The draft session evaluates the prompt into its block as the drafter begins.
    if (d && dkv) d->share_prefix(std::move(dkv), int(p.size()));
    // The block counts the prompt's rows from now on.
    slot.reserved = std::max<int64_t>(0, slot.reserved - int64_t(p.size()));
}

}  // namespace specula
