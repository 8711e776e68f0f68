// Scheduler: see scheduler.h.
#include "server/serving/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "common/clock.h"
#include "common/error.h"
#include "server/serving/kv_pool.h"
#include "server/serving/slot_files.h"
#include "speculative/draft_length/draft_length.h"
#include "tokenizer/prompt.h"

namespace specula {

namespace {

bool small_pages(const SchedulerConfig& c) {
    return c.kv_pool > 0 && c.kv_pool < int64_t(c.n_slots) * c.n_ctx;
}

SessionParams slot_params(const SchedulerConfig& c, ThreadPool& pool,
                          std::shared_ptr<ForwardPass> pass, const SpeculativeSetup& spec) {
    SessionParams sp{c.n_ctx, 0, c.type_k, c.type_v, &pool};
    sp.capture_layers = capture_layers(spec);  // an EAGLE-3 head reads the slots' layers
    sp.keep_hidden = keeps_hidden(spec);       // Medusa's heads read their final rows
    sp.shared_pass = std::move(pass);
    sp.n_ubatch = c.n_ubatch;
    // 4 KiB pages only where the pool is smaller than every slot's whole cache, so that the
    // memory committed must follow the positions in use; else 2 MiB pages (F16 attention at depth
    // 8192 runs ~20% faster on them, measured on Zen 5).
    sp.kv_small_pages = small_pages(c);
    return sp;
}

}  // namespace

Scheduler::Scheduler(const Runtime& rt, const SchedulerConfig& config)
    : rt_(rt),
      target_(*rt.target),
      spec_(rt.speculative),
      cfg_(config),
      pool_(default_threads(config.n_threads)),
      target_pass_(make_shared_pass(*rt.target)),
      draft_pass_(rt.speculative.draft_model ? make_shared_pass(*rt.speculative.draft_model)
                                             : nullptr),
      engine_(*rt.target, &pool_),
      slots_(make_slots(*rt.target, config.n_slots,
                        slot_params(config, pool_, target_pass_, rt.speculative))) {
    if (cfg_.prefill_chunk < 1) fail("prefill chunk must be >= 1, got ", cfg_.prefill_chunk);
    if (cfg_.kv_pool < 0) fail("the KV pool must be >= 0 positions, got ", cfg_.kv_pool);
    if (cfg_.kv_pool > 0 && cfg_.kv_pool < slots_[0]->target->n_ctx())
        fail("a KV pool of ", cfg_.kv_pool, " positions cannot hold one sequence of ",
             slots_[0]->target->n_ctx());
    pool_state_.capacity = cfg_.kv_pool;
    if (cfg_.prefix_min_tokens > 0 && slots_[0]->target->can_snapshot())
        prefixes_ = std::make_unique<PrefixBlocks>(cfg_.prefix_min_tokens, cfg_.n_slots);
    pool_state_.prefixes = prefixes_ != nullptr;
    for (auto& s : slots_) free_.push_back(s.get());
    thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void Scheduler::submit(std::shared_ptr<Job> job) {
    {
        std::lock_guard lock(mu_);
        queue_.push_back(std::move(job));
    }
    cv_.notify_all();
}

void Scheduler::loop() {
    for (;;) {
        {
            std::unique_lock lock(mu_);
            // Idle: sleep until a request comes; busy: look for cancelled waiters every step.
            cv_.wait_for(lock, std::chrono::milliseconds(100), [&] {
                return stop_ || !queue_.empty() || !active_.empty() || !actions_.empty() ||
                       !preempted_.empty();
            });
            if (stop_) break;
        }
        run_slot_actions();
        admit();
        if (active_.empty()) continue;
        try {
            step();
        } catch (const std::exception& e) {  // not expected: fail every running request
            std::fprintf(stderr, "serve: scheduler step failed: %s\n", e.what());
            for (auto& a : active_) {
                {
                    std::lock_guard lk(a->job->mu);
                    a->job->error = e.what();
                }
                finish(*a, "callback");
            }
            active_.clear();
        }
    }
    for (auto& a : active_) finish(*a, "callback");
    active_.clear();
    for (auto& a : preempted_) drop_preempted(*a);
    preempted_.clear();
    std::lock_guard lock(mu_);
    for (auto& act : actions_) {
        std::lock_guard lk(act->mu);
        act->status = 503;
        act->error = "the server is stopping";
        act->done = true;
        act->cv.notify_all();
    }
    for (auto& j : queue_) {
        std::lock_guard lk(j->mu);
        j->done = true;
        j->cv.notify_all();
    }
}

// What a slot file records of the model its cache belongs to.
static std::string model_identity(const Model& m) {
    const HParams& hp = m.hparams();
    return hp.arch + " n_layer=" + std::to_string(hp.n_layer) +
           " n_embd=" + std::to_string(hp.n_embd) + " n_vocab=" + std::to_string(hp.n_vocab) +
           " file_bytes=" + std::to_string(m.file().file_size()) +
           " sample_hash=" + std::to_string(m.file().identity().sample_hash);
}

void Scheduler::slot_action(const std::shared_ptr<SlotAction>& action) {
    {
        std::lock_guard lock(mu_);
        actions_.push_back(action);
    }
    cv_.notify_all();
    std::unique_lock lk(action->mu);
    action->cv.wait(lk, [&] { return action->done; });
}

// Between steps: the slot actions asked for, each on a slot that holds no request (the scheduler
// thread is the only one that touches the slots' sessions).
void Scheduler::run_slot_actions() {
    std::deque<std::shared_ptr<SlotAction>> todo;
    {
        std::lock_guard lock(mu_);
        todo.swap(actions_);
    }
    for (auto& act : todo) {
        const auto t0 = clock_type::now();
        int status = 200, n_tokens = 0;
        size_t n_bytes = 0;
        std::string error;
        Slot* slot =
            act->slot >= 0 && act->slot < n_slots() ? slots_[size_t(act->slot)].get() : nullptr;
        try {
            if (!slot) {
                status = 404;
                error = "no slot " + std::to_string(act->slot) + " (there are " +
                        std::to_string(n_slots()) + ")";
            } else if (slot->busy) {
                status = 409;
                error = "slot " + std::to_string(act->slot) + " is busy with a request";
            } else {
                Session& t = *slot->target;
                Session* d = slot->drafter ? slot->drafter->session() : nullptr;
                if (act->kind == SlotAction::erase) {
                    n_tokens = t.n_past();
                    t.reset();
                    if (d) d->reset();
                } else if (!t.can_snapshot()) {
                    status = 400;
                    error =
                        "this model's KV cache cannot be saved or restored (sliding-window "
                        "layers, a recurrent state or -ngl)";
                } else if (act->kind == SlotAction::save) {
                    const KVSnapshot s = t.snapshot();
                    n_tokens = int(s.tokens.size());
                    n_bytes = write_slot_file(act->path, s, model_identity(target_));
                } else {
                    const KVSnapshot s =
                        read_slot_file(act->path, model_identity(target_), n_bytes);
                    try {
                        t.restore(s);
                    } catch (const Error&) {
                        t.reset();
                        fail(act->path, ": the slot file is not of this model's KV cache shape");
                    }
                    n_tokens = int(s.tokens.size());
                    if (d) d->reset();  // the draft cache follows the history again
                }
            }
        } catch (const Error& e) {
            status = 400;
            error = e.what();
        }
        std::lock_guard lk(act->mu);
        act->status = status;
        act->error = error;
        act->n_tokens = n_tokens;
        act->n_bytes = n_bytes;
        act->ms = ms_since(t0);
        act->done = true;
        act->cv.notify_all();
    }
}

// Between steps: drops waiters whose clients left, and gives free slots to the oldest waiters
// whose KV pool reservation fits (first come, first served: one that does not fit holds the
// ones behind it back; after kv_wait_s it ends with an error naming the pool). Preempted
// requests come first.
void Scheduler::admit() {
    const bool held_back = !resume_preempted();
    struct Starting {
        std::shared_ptr<Job> job;
        Slot* slot;
        PrefixPlan plan;
    };
    std::vector<Starting> starting;
    std::vector<std::vector<token_id>> building;  // the prefixes jobs of this round will build
    pinned_.clear();
    int waiting = int(preempted_.size());
    {
        std::lock_guard lock(mu_);
        bool blocked = held_back;
        // The prompts waiting (a branch is planned for a prefix that others share too), held
        // for the round: a job leaving the queue may be freed by its service thread.
        std::vector<std::shared_ptr<Job>> held;
        std::vector<std::span<const token_id>> queued;
        if (prefixes_ && !free_.empty()) held.assign(queue_.begin(), queue_.end());
        for (const auto& q : held) queued.emplace_back(q->prompt.data(), q->prompt.size() - 1);
        for (auto it = queue_.begin(); it != queue_.end();) {
            Job& j = **it;
            if (j.cancel) {
                std::lock_guard lk(j.mu);
                j.done = true;
                j.cv.notify_all();
                it = queue_.erase(it);
                continue;
            }
            if (free_.empty()) {
                ++it;
                continue;
            }
            const SlotMatch m = best_slot(free_, j.prompt);
            PrefixPlan plan;
            const std::span<const token_id> prefix(j.prompt.data(), j.prompt.size() - 1);
            if (prefixes_ && !j.echo_logprobs)
                plan = prefixes_->plan(prefix, m.n_prefix, building, queued);
            if (plan.kind == PrefixPlan::wait) {  // its prefix is being evaluated: not again
                ++it;
                continue;
            }
            if (blocked || (cfg_.kv_pool > 0 && !fits_pool(j.prompt, need(j), *m.slot, plan))) {
                blocked = true;
                if (ms_since(j.t_arrival) > 1000 * cfg_.kv_wait_s) {
                    pool_timeout(j);
                    it = queue_.erase(it);
                    continue;
                }
                ++waiting;
                ++it;
                continue;
            }
            free_.erase(std::find(free_.begin(), free_.end(), m.slot));
            m.slot->busy = true;
            m.slot->last_used = ++slot_uses_;
            if (plan.block) pinned_.push_back(plan.block);  // joined, extended or copied from
            if (plan.kind == PrefixPlan::build || plan.kind == PrefixPlan::extend ||
                plan.kind == PrefixPlan::branch)
                building.emplace_back(prefix.begin(), prefix.end());
            starting.push_back({std::move(*it), m.slot, plan});
            it = queue_.erase(it);
        }
    }
    for (Starting& st : starting) start(std::move(st.job), st.slot, st.plan);
    pinned_.clear();
    update_pool_state(waiting);
}

// Greedy drafting does not depend on the request, so greedy requests share the slot's drafter
// (its draft Session is allocated once and follows each history); a sampling request gets a fresh
// one whose draws follow the request's seed. N-gram drafting is deterministic: always the slot's.
Drafter* Scheduler::drafter_for(Slot& slot, const SamplingParams& sp,
                                std::unique_ptr<Drafter>& own) {
    const SpecMethod method = spec_.config.method;
    if (method == SpecMethod::none) return nullptr;
    DrafterParams dp{cfg_.n_ctx, 0, sp, cfg_.type_k, cfg_.type_v, &pool_};
    dp.shared_pass = draft_pass_;
    dp.kv_small_pages = small_pages(cfg_);
    if (sp.temp <= 0.f || method == SpecMethod::ngram) {
        if (!slot.drafter) {
            dp.sampling = SamplingParams{0.f, 0, 1.f, 0.f, 0};
            slot.drafter = new_drafter(rt_, dp);
        }
        return slot.drafter.get();
    }
    own = new_drafter(rt_, dp);
    return own.get();
}

void Scheduler::start(std::shared_ptr<Job> job, Slot* slot, const PrefixPlan& plan) {
    auto a = std::make_unique<Active>();
    a->job = job;
    a->slot = slot;
    a->sampler = std::make_unique<Sampler>(job->sampling);
    Sequence& q = a->seq;
    q.target = slot->target.get();
    q.sampler = a->sampler.get();
    q.drafter = drafter_for(*slot, job->sampling, a->own_drafter);
    q.constraints = job->constraints.get();
    q.auto_length = job->draft_auto ? &slot->draft_length : nullptr;
    q.by_load = job->draft_auto;
    q.params = job->gen;
    q.on_token = [this, p = a.get()](token_id id, bool drafted) {
        return on_token(*p, id, drafted);
    };
    if (job->n_logprobs >= 0) {
        q.on_row = [j = job.get(), nv = target_.hparams().n_vocab](token_id id, const float* row) {
            TokenLogprob lp = token_logprob(row, nv, id, j->n_logprobs);
            std::lock_guard lk(j->mu);
            j->logprobs.push_back(std::move(lp));
        };
    }
    a->text = std::make_unique<TextStream>(job->stops, job->include_stop_str);
    a->reach = need(*job);
    a->full = full_need(*job);
    if (cfg_.prompt_cache) use_prompt_cache(*slot, q.drafter, job->prompt, plan);
    if (prefixes_) share_prefix(*slot, q.drafter, job->prompt, plan);
    // The echo pass evaluates the whole prompt; the start then keeps all of it but the last token.
    if (job->echo_logprobs) echo_logprobs(*job, *slot->target);
    engine_.start(q, job->prompt, /*reuse_cache=*/true);
    {
        std::lock_guard lk(job->mu);
        job->started = true;
        job->slot_id = slot->id;
        job->n_cached = q.stats.n_prompt_cached;
        job->cv.notify_all();
    }
    active_.push_back(std::move(a));
}

// --cache-ram (before the sequence starts on the slot): what the slot holds beyond the prefix this
// prompt shares goes to the pool; a pooled entry sharing more comes back into the slot, or, where
// the prompt is to build a prefix block, into the block (its rows are not evaluated again, and
// the requests that share them read them).
void Scheduler::use_prompt_cache(Slot& slot, Drafter* drafter, std::span<const token_id> prompt,
                                 const PrefixPlan& plan) {
    Session& t = *slot.target;
    if (!t.can_snapshot()) return;
    const std::span<const token_id> p = prompt.first(prompt.size() - 1);
    const int have = t.common_prefix(p);
    Session* slot_draft = slot.drafter ? slot.drafter->session() : nullptr;
    if (slot_draft && !slot_draft->can_snapshot()) slot_draft = nullptr;
    if (t.n_past() > have) {
        PromptCacheEntry e{t.snapshot(), std::nullopt};
        if (slot_draft && slot_draft->n_past() > 0) e.draft = slot_draft->snapshot();
        cfg_.prompt_cache->put(std::move(e));
    }
    // A block the request reads in place serves as much without a copy.
    const bool reads = plan.kind == PrefixPlan::join || plan.kind == PrefixPlan::extend;
    std::optional<PromptCacheEntry> hit =
        cfg_.prompt_cache->take(prompt, std::max(have, reads ? plan.n : 0));
    if (!hit) return;
    if (plan.kind == PrefixPlan::build && block_from_cache(slot, drafter, p, *hit)) return;
    t.restore(hit->target);
    Session* d = drafter ? drafter->session() : nullptr;
    if (d && hit->draft && d->can_snapshot()) {
        try {
            d->restore(*hit->draft);
        } catch (const Error&) {  // another draft shape: the drafter starts over instead
            d->reset();
        }
    }
}

// echo with logprobs: each prompt token's logprob, from all-logits passes over the prompt in
// chunks (the logits held at once stay small whatever its length). This runs on the scheduler
// thread before the job's first step (the other slots wait for it) and leaves the target holding
// prompt[0, n-1), which is what the generation starts from.
void Scheduler::echo_logprobs(Job& job, Session& target) {
    constexpr size_t kChunk = kEchoChunk;
    const std::span<const token_id> prompt(job.prompt);
    const int nv = target_.hparams().n_vocab;
    std::vector<TokenLogprob> out;
    out.push_back({prompt[0], 0.f, 0, {}});
    target.reset();
    for (size_t b = 0; b + 1 < prompt.size(); b += kChunk) {
        const size_t n = std::min(kChunk, prompt.size() - 1 - b);
        target.eval(prompt.subspan(b, n), /*all_logits=*/true);
        for (size_t i = 0; i < n; ++i)
            out.push_back(token_logprob(target.logits(int(i)), nv, prompt[b + i + 1],
                                        job.n_prompt_top,
                                        /*with_rank=*/true));
    }
    std::lock_guard lk(job.mu);
    job.prompt_logprobs = std::move(out);
}

std::string Scheduler::models_changed() const {
    std::string why = target_.file().changed_on_disk();
    if (why.empty() && spec_.draft_model) why = spec_.draft_model->file().changed_on_disk();
    if (why.empty() && target_.mtp_file()) why = target_.mtp_file()->changed_on_disk();
    return why;
}

// The per-token hook of a generator (scheduler thread): text out to the job; false stops.
bool Scheduler::on_token(Active& a, token_id id, bool drafted) {
    Job& j = *a.job;
    // A model file changed on disk (or was truncated: the pass read zeros) may have made this
    // token: it is never handed out; the request ends with the error naming the file.
    if (std::string why = models_changed(); !why.empty()) {
        std::lock_guard lk(j.mu);
        j.error = why;
        return false;
    }
    const bool stop =
        a.text->push(target_.tokenizer().token_to_piece(id, false), drafted, a.n_emitted++);
    if (cfg_.metrics) cfg_.metrics->set_kv_tokens(a.slot->id, a.slot->target->n_past());
    std::vector<TokenPiece> pieces = a.text->take();
    {
        std::lock_guard lk(j.mu);
        if (j.ttft_s == 0)
            j.ttft_s = std::chrono::duration<double>(clock_type::now() - j.t_arrival).count();
        if (j.running_stats) {
            j.stats = a.seq.stats;
            j.stats.n_generated = a.n_emitted;
            j.stats.t_gen_ms = ms_since(a.seq.work.t_gen);
        }
        for (auto& p : pieces) j.pieces.push_back(std::move(p));
        j.cv.notify_all();
    }
    if (stop) a.stopped = true;
    if (!stop &&
        std::find(j.stop_token_ids.begin(), j.stop_token_ids.end(), id) != j.stop_token_ids.end()) {
        a.stopped = a.token_stopped = true;
        return false;
    }
    return !stop && !j.cancel;
}

void Scheduler::step() {
    for (size_t i = 0; i < active_.size();) {
        Active& a = *active_[i];
        if (a.job->cancel) {
            finish(a, "callback");
            active_.erase(active_.begin() + long(i));
            continue;
        }
        ++i;
    }
    if (cfg_.kv_pool > 0) grow_reservations();
    seqs_.clear();
    for (auto& a : active_) seqs_.push_back(&a->seq);
    const StepReport r =
        engine_.step(seqs_, StepLimits{cfg_.prefill_chunk, cfg_.prefill_chunk_idle});
    if (r.draft_rounds > 0) {
        draft_passes_ += r.draft_rounds;
        draft_seqs_ += r.draft_seqs;
        if (cfg_.metrics)
            cfg_.metrics->record_draft_passes(r.draft_rounds, r.draft_seqs, r.draft_ms);
    }
    if (cfg_.metrics && r.n_items > 0)
        cfg_.metrics->record_pass(r.n_items, r.rows, r.pass_ms, r.k_load);
    // Finished ones leave now (the next step would skip them anyway).
    for (size_t i = 0; i < active_.size();) {
        Active& a = *active_[i];
        if (!a.seq.done()) {
            ++i;
            continue;
        }
        finish(a, a.seq.stats.stop_reason.c_str());
        active_.erase(active_.begin() + long(i));
    }
}

// Ends a job: the slot keeps what its cache holds for the next request's prefix.
void Scheduler::finish(Active& a, const char* why) {
    Slot& s = *a.slot;
    const std::string reason = why;  // may point into the sequence's stats
    engine_.finish(a.seq, reason.c_str());
    // The cache holds history[0, n_past) (Engine::finish); the next request matches against it.
    // Before the job is marked done: a client that scrapes /metrics right after its answer must
    // see the slot's KV released (a cached prefix is reusable, not in use, as in vLLM).
    if (cfg_.metrics) cfg_.metrics->set_kv_tokens(s.id, 0);
    // The pool counts what the slot keeps committed from now on: its cached prefix (the rows a
    // rollback left past it go back to the system).
    if (small_pages(cfg_)) {  // a pool that holds every whole cache needs nothing back
        s.target->release_kv();
        if (Session* d = s.drafter ? s.drafter->session() : nullptr) d->release_kv();
    }
    if (prefixes_) {
        prefixes_->built(s.target.get());  // a block it built holds what it holds
        // A builder cut short (cancelled mid-prompt) stops writing into its block: the slot lets
        // it go rather than go on adding rows to it for a later request.
        Session* d = s.drafter ? s.drafter->session() : nullptr;
        if (s.target->shared_prefix() > s.target->n_past()) s.target->unshare();
        if (d && d->shared_prefix() > d->n_past()) d->unshare();
    }
    s.reserved = 0;
    s.busy = false;  // likewise for GET /slots
    if (cfg_.kv_pool > 0) update_pool_state();
    complete(a);
    {
        std::lock_guard lock(mu_);
        free_.push_back(&s);
    }
}

void Scheduler::complete(Active& a) {
    Job& j = *a.job;
    {
        std::lock_guard lk(j.mu);
        if (!j.cancel) {  // the text held back for stop strings goes out
            std::vector<TokenPiece> rest = a.text->finish();
            for (auto& p : rest) j.pieces.push_back(std::move(p));
        }
        j.text_stopped = a.text->stopped() || a.token_stopped;
        j.stop_word = a.text->matched();
        j.stats = a.seq.stats;
        j.done = true;
        j.cv.notify_all();
    }
}

bool Scheduler::slot_busy(int i) const {
    return i >= 0 && i < n_slots() && slots_[size_t(i)]->busy;
}

}  // namespace specula
