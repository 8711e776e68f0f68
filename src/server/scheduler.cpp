// Scheduler: see scheduler.h.
#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "common/clock.h"
#include "common/error.h"
#include "frontend/prompt.h"

namespace specula {

// A job holding a slot.
struct Scheduler::Active {
    std::shared_ptr<Job> job;
    Slot* slot = nullptr;
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<Drafter> own_drafter;  // a sampling request's own drafter
    std::unique_ptr<Generator> gen;
    std::unique_ptr<TextStream> text;
    SpecStats st;
    bool decoding = false;  // the prompt (all but its last token) is in the target
    bool stopped = false;   // a stop string or the client ended it
    int n_emitted = 0;      // tokens handed to the text stream (their index)
    bool drafted = false;   // this step's proposal came from draft_batched()
    int draft_steps = 0;
    double draft_ms = 0;
    clock_type::time_point t_start, t_gen;
};

Scheduler::Scheduler(const Model& target, const SpeculativeSetup& spec,
                     const SchedulerConfig& config)
    : target_(target),
      spec_(spec),
      cfg_(config),
      pool_(default_threads(config.n_threads)),
      batch_(target, pool_),
      slots_(
          make_slots(target, config.n_slots, config.n_ctx, pool_, config.type_k, config.type_v)) {
    if (cfg_.prefill_chunk < 1) fail("prefill chunk must be >= 1, got ", cfg_.prefill_chunk);
    for (auto& s : slots_) free_.push_back(s.get());
    if (spec_.config.method == SpecMethod::draft_model && spec_.draft_model)
        draft_batch_ = std::make_unique<DraftBatch>(*spec_.draft_model, pool_);
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
            cv_.wait_for(lock, std::chrono::milliseconds(100),
                         [&] { return stop_ || !queue_.empty() || !active_.empty(); });
            if (stop_) break;
        }
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
    std::lock_guard lock(mu_);
    for (auto& j : queue_) {
        std::lock_guard lk(j->mu);
        j->done = true;
        j->cv.notify_all();
    }
}

// Between steps: drops waiters whose clients left, and gives free slots to the oldest waiters.
void Scheduler::admit() {
    std::vector<std::pair<std::shared_ptr<Job>, SlotMatch>> starting;
    {
        std::lock_guard lock(mu_);
        for (auto it = queue_.begin(); it != queue_.end();) {
            if ((*it)->cancel) {
                std::lock_guard lk((*it)->mu);
                (*it)->done = true;
                (*it)->cv.notify_all();
                it = queue_.erase(it);
            } else if (!free_.empty()) {
                const SlotMatch m = best_slot(free_, (*it)->prompt);
                free_.erase(std::find(free_.begin(), free_.end(), m.slot));
                starting.emplace_back(std::move(*it), m);
                it = queue_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& [job, m] : starting) start(std::move(job), m.slot, m.n_prefix);
}

// Greedy drafting does not depend on the request, so greedy requests share the slot's drafter
// (its draft Session is allocated once and follows each history); a sampling request gets a fresh
// one whose draws follow the request's seed. N-gram drafting is deterministic: always the slot's.
Drafter* Scheduler::drafter_for(Slot& slot, const SamplingParams& sp,
                                std::unique_ptr<Drafter>& own) {
    const SpecMethod method = spec_.config.method;
    if (method == SpecMethod::none) return nullptr;
    DrafterParams dp{cfg_.n_ctx, 0, sp, cfg_.type_k, cfg_.type_v, &pool_};
    if (sp.temp <= 0.f || method == SpecMethod::ngram) {
        if (!slot.drafter) {
            dp.sampling = SamplingParams{0.f, 0, 1.f, 0.f, 0};
            slot.drafter = make_drafter(spec_, dp);
        }
        return slot.drafter.get();
    }
    own = make_drafter(spec_, dp);
    return own.get();
}

void Scheduler::start(std::shared_ptr<Job> job, Slot* slot, int n_prefix) {
    if (job->echo_logprobs) n_prefix = 0;  // the echo pass evaluates the whole prompt anyway
    auto a = std::make_unique<Active>();
    a->job = job;
    a->slot = slot;
    a->t_start = clock_type::now();
    slot->target->rollback(n_prefix);  // the cached prefix stays, the rest is overwritten
    slot->cached.resize(size_t(n_prefix));
    a->sampler = std::make_unique<Sampler>(job->sampling);
    Drafter* drafter = drafter_for(*slot, job->sampling, a->own_drafter);
    a->gen = std::make_unique<Generator>(*slot->target, *a->sampler, drafter, job->gen,
                                         job->draft_auto ? &slot->draft_length : nullptr,
                                         job->constraints.get());
    if (job->n_logprobs >= 0) {
        a->gen->observe_rows(
            [j = job.get(), nv = target_.hparams().n_vocab](token_id id, const float* row) {
                TokenLogprob lp = token_logprob(row, nv, id, j->n_logprobs);
                std::lock_guard lk(j->mu);
                j->logprobs.push_back(std::move(lp));
            });
    }
    a->text = std::make_unique<TextStream>(job->stops);
    if (job->echo_logprobs) echo_logprobs(*job, *slot->target);
    a->st = a->gen->begin(job->prompt);
    a->decoding = slot->target->n_past() + 1 >= int(job->prompt.size());
    a->t_gen = clock_type::now();
    {
        std::lock_guard lk(job->mu);
        job->started = true;
        job->slot_id = slot->id;
        job->n_cached = n_prefix;
        job->cv.notify_all();
    }
    active_.push_back(std::move(a));
}

// echo with logprobs: each prompt token's logprob, from all-logits passes over the prompt in
// chunks (the logits held at once stay small whatever its length). This runs on the scheduler
// thread before the job's first step (the other slots wait for it) and leaves the target holding
// prompt[0, n-1), which is what the generation starts from.
void Scheduler::echo_logprobs(Job& job, Session& target) {
    constexpr size_t kChunk = 64;
    const std::span<const token_id> prompt(job.prompt);
    const int nv = target_.hparams().n_vocab;
    std::vector<TokenLogprob> out;
    out.push_back({prompt[0], 0.f, {}});
    target.reset();
    for (size_t b = 0; b + 1 < prompt.size(); b += kChunk) {
        const size_t n = std::min(kChunk, prompt.size() - 1 - b);
        target.eval(prompt.subspan(b, n), /*all_logits=*/true);
        for (size_t i = 0; i < n; ++i)
            out.push_back(
                token_logprob(target.logits(int(i)), nv, prompt[b + i + 1], job.n_logprobs));
    }
    std::lock_guard lk(job.mu);
    job.prompt_logprobs = std::move(out);
}

// The per-token hook of a generator (scheduler thread): text out to the job; false stops.
bool Scheduler::on_token(Active& a, token_id id, bool drafted) {
    Job& j = *a.job;
    const bool stop =
        a.text->push(target_.tokenizer().token_to_piece(id, false), drafted, a.n_emitted++);
    if (cfg_.metrics) cfg_.metrics->set_kv_tokens(a.slot->id, a.slot->target->n_past());
    std::vector<TokenPiece> pieces = a.text->take();
    {
        std::lock_guard lk(j.mu);
        if (j.ttft_s == 0)
            j.ttft_s = std::chrono::duration<double>(clock_type::now() - j.t_arrival).count();
        for (auto& p : pieces) j.pieces.push_back(std::move(p));
        j.cv.notify_all();
    }
    if (stop) a.stopped = true;
    return !stop && !j.cancel;
}

// One draft length for the decoding slots that adapt (--draft auto without a per-request length),
// from their acceptance and the measured pass cost at this load (server/load_draft.h); -1: none.
int Scheduler::draft_length_by_load(int prefill_rows) {
    ctl_.clear();
    int rows_other = prefill_rows;
    double draft_ms = 0;
    for (const Active* a : decoding_) {
        if (a->job->draft_auto) {
            ctl_.push_back(&a->slot->draft_length);
            draft_ms = std::max(draft_ms, a->slot->draft_length.draft_cost());
        } else {
            rows_other += 1 + (spec_.config.method == SpecMethod::none ? 0 : a->job->gen.n_draft);
        }
    }
    if (ctl_.empty()) return -1;
    return load_draft_.choose(ctl_, rows_other, draft_ms);
}

// Proposes for every decoding slot that drafts with the draft model, in one draft pass per draft
// step (speculative/draft_batch.h); each gets an equal share of the time. The others (n-gram, no
// draft this step) propose in plan_step.
void Scheduler::draft_batched(int k_load) {
    draft_jobs_.clear();
    draft_owner_.clear();
    for (Active* a : decoding_) {
        a->drafted = false;
        if (!draft_batch_) continue;
        auto* d = dynamic_cast<DraftModelDrafter*>(a->gen->drafter());
        const int n = d ? a->gen->draft_budget(a->job->draft_auto ? k_load : -1) : 0;
        if (n <= 0) continue;
        draft_jobs_.push_back({d, a->gen->history(), n, &a->gen->proposal()});
        draft_owner_.push_back(a);
    }
    if (draft_jobs_.empty()) return;
    const auto t0 = clock_type::now();
    const int passes = draft_batch_->propose(draft_jobs_);
    const double ms = ms_since(t0);
    long seqs = 0;
    for (size_t i = 0; i < draft_jobs_.size(); ++i) {
        Active& a = *draft_owner_[i];
        a.drafted = true;
        a.draft_steps = draft_jobs_[i].steps;
        a.draft_ms = ms / double(draft_jobs_.size());
        seqs += draft_jobs_[i].steps;
    }
    draft_passes_ += passes;
    draft_seqs_ += seqs;
    if (cfg_.metrics) cfg_.metrics->record_draft_passes(passes, int(seqs), ms);
}

void Scheduler::step() {
    items_.clear();
    item_owner_.clear();
    prefilling_.clear();
    decoding_.clear();
    for (size_t i = 0; i < active_.size();) {
        Active& a = *active_[i];
        const char* why = a.job->cancel ? "callback"
                          : a.decoding  ? a.gen->stop_before_step()
                                        : nullptr;
        if (why) {
            finish(a, why);
            active_.erase(active_.begin() + long(i));
            continue;
        }
        ++i;
        (a.decoding ? decoding_ : prefilling_).push_back(&a);
    }
    // The prefill budget goes to the prompts closest to their first token first, so a short
    // prompt is never stuck behind a long one.
    auto left = [](const Active* a) {
        return int(a->job->prompt.size()) - 1 - a->slot->target->n_past();
    };
    std::stable_sort(prefilling_.begin(), prefilling_.end(),
                     [&](const Active* x, const Active* y) { return left(x) < left(y); });
    int budget = cfg_.prefill_chunk;
    for (Active* a : prefilling_) {
        if (budget == 0) break;
        Session& t = *a->slot->target;
        const int n = std::min(budget, left(a));
        budget -= n;
        items_.push_back(
            {&t, std::span(a->job->prompt).subspan(size_t(t.n_past()), size_t(n)), false});
        item_owner_.push_back(a);
    }
    const int k_load = draft_length_by_load(cfg_.prefill_chunk - budget);
    draft_batched(k_load);
    for (Active* a : decoding_) {
        items_.push_back({a->slot->target.get(),
                          a->drafted ? a->gen->plan_step_drafted(a->draft_steps, a->draft_ms)
                                     : a->gen->plan_step(a->job->draft_auto ? k_load : -1),
                          true});
        item_owner_.push_back(a);
    }
    if (items_.empty()) return;
    int rows = 0;
    for (const BatchItem& it : items_) rows += int(it.tokens.size());
    const auto t0 = clock_type::now();
    batch_.eval(items_);
    const double pass_ms = ms_since(t0);
    if (!decoding_.empty()) load_draft_.observe_pass(rows, pass_ms);
    if (cfg_.metrics) cfg_.metrics->record_pass(int(items_.size()), rows, pass_ms, k_load);
    for (size_t k = 0; k < items_.size(); ++k) {
        Active& a = *item_owner_[k];
        if (!items_[k].all_logits) {  // a prompt chunk
            if (a.slot->target->n_past() + 1 >= int(a.job->prompt.size())) {
                a.decoding = true;
                a.st.t_prompt_ms = ms_since(a.t_start);
                a.t_gen = clock_type::now();
            }
            continue;
        }
        const StepRecord& r = a.gen->finish_step(
            [&](token_id id, bool drafted) { return on_token(a, id, drafted); }, pass_ms);
        a.st.add(r);
        if (a.job->draft_auto) a.slot->draft_length.observe(r);
        if (r.stop) a.st.stop_reason = r.stop;
    }
    // Finished ones leave now (the next step would find them too, one pass later).
    for (size_t i = 0; i < active_.size();) {
        Active& a = *active_[i];
        if (a.st.stop_reason.empty()) {
            ++i;
            continue;
        }
        finish(a, a.st.stop_reason.c_str());
        active_.erase(active_.begin() + long(i));
    }
}

// Ends a job: the slot keeps what its cache holds for the next request's prefix.
void Scheduler::finish(Active& a, const char* why) {
    Slot& s = *a.slot;
    std::string reason = why;
    if (a.decoding) {
        a.gen->end();
        a.st.t_gen_ms = ms_since(a.t_gen);
        const auto& h = a.gen->history();
        s.cached.assign(h.begin(), h.begin() + std::min<long>(long(h.size()), s.target->n_past()));
    } else {
        s.cached.assign(a.job->prompt.begin(), a.job->prompt.begin() + s.target->n_past());
    }
    if (s.cached.size() != size_t(s.target->n_past())) s.target->rollback(int(s.cached.size()));
    a.st.stop_reason = reason;
    // Before the job is marked done: a client that scrapes /metrics right after its answer must
    // see the slot's KV released (a cached prefix is reusable, not in use, as in vLLM).
    if (cfg_.metrics) cfg_.metrics->set_kv_tokens(s.id, 0);
    Job& j = *a.job;
    {
        std::lock_guard lk(j.mu);
        if (!j.cancel) {  // the text held back for stop strings goes out
            std::vector<TokenPiece> rest = a.text->finish();
            for (auto& p : rest) j.pieces.push_back(std::move(p));
        }
        j.text_stopped = a.text->stopped();
        j.stats = a.st;
        j.done = true;
        j.cv.notify_all();
    }
    {
        std::lock_guard lock(mu_);
        free_.push_back(&s);
    }
}

}  // namespace specula
