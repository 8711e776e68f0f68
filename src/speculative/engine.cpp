// Engine: see engine.h.
#include "speculative/engine.h"

#include <algorithm>

#include "common/error.h"
#include "speculative/drafters/forced_drafts.h"

namespace specula {

Engine::Engine(const Model& target, ThreadPool* pool, const LoadDraftParams& load)
    : target_(target), pool_(pool), load_(load), load_params_(load), drafts_(pool) {}

Engine::~Engine() = default;

void Engine::start(Sequence& s, std::span<const token_id> prompt, bool reuse_cache) {
    if (!s.target || !s.sampler) fail("engine: a sequence needs a target session and a sampler");
    if (&s.target->model() != &target_) fail("engine: the sequence's target is of another model");
    const GenParams& p = s.params;
    if (p.n_draft < 0) fail("draft length must be >= 0, got ", p.n_draft);
    if (p.n_forced < 0) fail("forced draft length (n_forced) must be >= 0, got ", p.n_forced);
    if (p.synthetic_accept > 1.0)
        fail("synthetic acceptance must be in [0, 1], got ", p.synthetic_accept);
    if (prompt.empty()) fail("generate: the prompt has no tokens (not even BOS)");
    Session& t = *s.target;
    const int n_ctx = t.n_ctx();
    if (int(prompt.size()) > n_ctx)
        fail("prompt of ", prompt.size(), " tokens does not fit the context (n_ctx = ", n_ctx, ")");

    Sequence::Work& w = s.work;
    w.t_start = clock_type::now();
    const int n_vocab = target_.hparams().n_vocab;
    // Buffers sized up front: the steps do not allocate.
    int max_draft = p.n_draft;
    if (s.auto_length) max_draft = std::max(max_draft, s.auto_length->params().n_max);
    if (s.by_load) max_draft = std::max(max_draft, load_params_.n_max);
    if (s.constraints && s.constraints->has_grammar()) max_draft = std::max(max_draft, p.n_forced);
    const size_t max_batch = size_t(max_draft) + 1;
    s.history.reserve(size_t(n_ctx) + 1);
    s.output.reserve(size_t(n_ctx) + 1);
    w.draft.tokens.reserve(max_batch);
    w.forced_tokens.reserve(max_batch);
    w.forced_bytes.reserve(256);
    w.batch.reserve(max_batch);
    w.rows.reserve(max_batch);
    s.rec.emitted.reserve(max_batch);
    if (!w.scratch) w.scratch = std::make_unique<VerifyScratch>(n_vocab);
    if (s.constraints && !s.constraints->active()) s.constraints = nullptr;
    if (s.constraints && w.constrained.size() < max_batch)
        w.constrained.resize(max_batch, std::vector<float>(size_t(n_vocab)));
    w.synthetic_rng.seed(s.sampler->seed() ^ 0x5DEECE66Dull);

    s.stats = SpecStats{};
    s.stats.drafter = s.drafter ? s.drafter->name() : "";
    s.stats.synthetic = p.synthetic_accept >= 0.0 && s.drafter;
    s.stats.n_prompt = int(prompt.size());
    // Per-position counters sized up front too.
    s.stats.pos_reached.reserve(max_batch);
    s.stats.pos_accepted.reserve(max_batch);
    const int keep = reuse_cache ? t.common_prefix(prompt.first(prompt.size() - 1)) : 0;
    s.stats.n_prompt_cached = keep;
    s.n_prompt = int(prompt.size());
    s.history.assign(prompt.begin(), prompt.end());
    s.output.clear();
    s.rec = StepRecord{};
    s.rec.emitted.reserve(max_batch);
    if (s.constraints) {
        s.constraints->restart();  // no history, the grammar at its start
        s.constraints->push_prompt(prompt);
    }
    t.rollback(keep);
    bind(s, keep);
    if (s.decoding) {
        s.stats.t_prompt_ms = ms_since(w.t_start);
        w.t_gen = clock_type::now();
    }
}

// The drafter follows the sequence's target, which holds history[0, keep); then whether the
// target still has history to evaluate (all of it but the last token, which goes with the first
// draft).
void Engine::bind(Sequence& s, int keep) {
    // Set on every generation: a drafter shared between requests forgets an earlier one's guide.
    if (s.drafter) {
        s.drafter->guide(s.constraints);
        s.drafter->costs(s.auto_length ? &cost_ : nullptr);
        s.drafter->attach(s.target);
        keep > 0 ? s.drafter->resume(s.history) : s.drafter->begin(s.history);
    }
    s.decoding = s.target->n_past() + 1 >= int(s.history.size());
}

void Engine::resume(Sequence& s) {
    if (!s.target || s.history.empty() || s.done())
        fail("engine: resume needs a started, unfinished sequence with a target session");
    Session& t = *s.target;
    const std::span<const token_id> h(s.history);
    if (int(h.size()) > t.n_ctx())
        fail("history of ", h.size(), " tokens does not fit the context (n_ctx = ", t.n_ctx(), ")");
    const int keep = t.common_prefix(h.first(h.size() - 1));
    t.rollback(keep);
    bind(s, keep);
}

void Engine::finish(Sequence& s, const char* why) {
    if (s.stats.stop_reason.empty()) s.stats.stop_reason = why;
    Session& t = *s.target;
    // Keeps "the target holds all of the history but its last token" for a caller that continues
    // (tokens after an early stop are dropped).
    if (s.decoding) {
        t.rollback(std::min(t.n_past(), int(s.history.size()) - 1));
        s.stats.t_gen_ms = ms_since(s.work.t_gen);
    }
    s.stats.plain_pass_ms = cost_.cost(1);
    if (s.drafter) s.drafter->end(s.history, s.n_prompt);
}

// Why `s` may not step again, or null.
static const char* stop_before_step(const Sequence& s) {
    if (s.params.n_predict >= 0 && int(s.output.size()) >= s.params.n_predict) return "n_predict";
    // The target evaluates `last` at position history.size() - 1, plus the drafts.
    if (int(s.history.size()) > s.target->n_ctx()) return "context";
    return nullptr;
}

// At most n draft tokens, within the context and n_predict.
static int fit_draft(const Sequence& s, int n) {
    n = std::min(n, s.target->n_ctx() - int(s.history.size()));
    if (s.params.n_predict >= 0) n = std::min(n, s.params.n_predict - int(s.output.size()) - 1);
    return std::max(n, 0);
}

// How many draft tokens `s` asks for this step (0: none).
int Engine::draft_length(const Sequence& s, int k_load) const {
    if (!s.drafter) return 0;
    if (s.by_load && k_load >= 0) return fit_draft(s, k_load);
    if (!s.auto_length) return fit_draft(s, s.params.n_draft);
    // A drafter that picks its own length (by cost) is asked for up to the controller's most.
    return fit_draft(s, s.drafter->picks_length() ? s.auto_length->params().n_max
                                                  : s.auto_length->choose(cost_));
}

// The tokens the grammar forces after the drafter's, within the draft length (or n_forced when
// there is none): see forced_drafts.h.
static void add_forced(Sequence& s) {
    Sequence::Work& w = s.work;
    w.n_own = w.draft.size();
    s.rec.n_forced = 0;
    if (!s.constraints || !s.constraints->has_grammar() || s.params.n_forced <= 0) return;
    const auto t0 = clock_type::now();
    const int n_max = w.n_draft > 0 ? w.n_draft : fit_draft(s, s.params.n_forced);
    s.rec.n_forced =
        append_forced_drafts(*s.constraints, w.draft, n_max, w.forced_bytes, w.forced_tokens);
    s.rec.draft_ms += ms_since(t0);
}

// One draft length for the decoding sequences that adapt by load, from their acceptance and the
// measured pass cost at this load; -1: none.
int Engine::choose_by_load(int prefill_rows) {
    ctl_.clear();
    int rows_other = prefill_rows;
    double draft_ms = 0;
    for (const Sequence* s : decoding_) {
        if (s->by_load && s->auto_length && s->drafter) {
            ctl_.push_back(s->auto_length);
            draft_ms = std::max(draft_ms, s->auto_length->draft_cost());
        } else {
            rows_other += 1 + draft_length(*s, -1);
        }
    }
    if (ctl_.empty()) return -1;
    return load_.choose(ctl_, rows_other, draft_ms, cost_);
}

// Keeps the prefix of a proposal the target can verify: at most the budget, ids in the target's
// vocabulary (a draft vocabulary may be up to 128 tokens larger), and nothing shorter than
// --draft-min.
static void trim_draft(Sequence& s, int n_vocab) {
    Draft& d = s.work.draft;
    int keep = std::min(d.size(), s.work.n_draft);
    for (int i = 0; i < keep; ++i)
        if (d.tokens[size_t(i)] < 0 || d.tokens[size_t(i)] >= n_vocab) keep = i;
    if (keep < s.params.draft_min) keep = 0;  // too short to be worth a wider pass
    d.tokens.resize(size_t(keep));
}

// Proposes for every decoding sequence with a drafter, their rounds evaluated together; each
// gets an equal share of the time.
void Engine::draft(StepReport& report, int k_load) {
    draft_jobs_.clear();
    draft_owner_.clear();
    for (Sequence* s : decoding_) {
        s->work.draft.clear();
        s->work.n_draft = draft_length(*s, k_load);
        if (s->work.n_draft <= 0) continue;
        draft_jobs_.push_back({s->drafter, s->history, s->work.n_draft, &s->work.draft});
        draft_owner_.push_back(s);
    }
    if (!draft_jobs_.empty()) propose(report);
    for (Sequence* s : decoding_) add_forced(*s);
}

void Engine::propose(StepReport& report) {
    const auto t0 = clock_type::now();
    report.draft_rounds = drafts_.propose(draft_jobs_);
    report.draft_ms = ms_since(t0);
    const int n_vocab = target_.hparams().n_vocab;
    for (size_t i = 0; i < draft_jobs_.size(); ++i) {
        Sequence& s = *draft_owner_[i];
        s.rec.n_draft_steps = draft_jobs_[i].steps;
        s.rec.draft_ms = report.draft_ms / double(draft_jobs_.size());
        report.draft_seqs += draft_jobs_[i].steps;
        trim_draft(s, n_vocab);
    }
}

void Engine::eval_target() {
    if (items_.size() == 1) {
        items_[0].session->eval(items_[0].tokens, items_[0].all_logits);
        return;
    }
    if (!pool_) fail("engine: several sequences in one step need a shared thread pool");
    if (!batch_) batch_ = std::make_unique<BatchEvaluator>(target_, *pool_);
    batch_->eval(items_);
}

StepReport Engine::step(std::span<Sequence* const> seqs, const StepLimits& limits) {
    StepReport report;
    prefilling_.clear();
    decoding_.clear();
    for (Sequence* s : seqs) {
        if (s->done()) continue;
        if (s->decoding) {
            if (const char* why = stop_before_step(*s)) {
                s->stats.stop_reason = why;
                continue;
            }
            StepRecord& r = s->rec;
            r.emitted.clear();
            r.stop = nullptr;
            r.n_draft_steps = 0;
            r.n_forced = r.n_forced_accepted = 0;
            r.draft_ms = 0;
            decoding_.push_back(s);
        } else {
            prefilling_.push_back(s);
        }
    }
    items_.clear();
    item_owner_.clear();
    // The prefill budget goes to the prompts closest to their first token first, so a short
    // prompt is never stuck behind a long one.
    // (A resumed sequence evaluates all of its history, output included, as its prompt.)
    auto left = [](const Sequence* s) { return int(s->history.size()) - 1 - s->target->n_past(); };
    std::stable_sort(prefilling_.begin(), prefilling_.end(),
                     [&](const Sequence* x, const Sequence* y) { return left(x) < left(y); });
    // A lone prompt (nothing decodes, nothing else prefills) holds nobody up with a big chunk.
    // (Several prompts starting together keep the small chunks: in a 16-client burst the big
    // first pass measured ~3% less aggregate throughput.)
    const bool lone = decoding_.empty() && prefilling_.size() == 1;
    const int full_budget = std::max(
        lone ? std::max(limits.prefill_tokens, limits.prefill_tokens_idle) : limits.prefill_tokens,
        1);
    int budget = full_budget;
    for (Sequence* s : prefilling_) {
        if (budget == 0) break;
        const int n = std::min(budget, left(s));
        budget -= n;
        const size_t from = size_t(s->target->n_past());
        items_.push_back({s->target, std::span(s->history).subspan(from, size_t(n)), false});
        item_owner_.push_back(s);
    }
    const int prefill_rows = report.rows = full_budget - budget;
    report.k_load = choose_by_load(prefill_rows);
    draft(report, report.k_load);
    for (Sequence* s : decoding_) {
        Sequence::Work& w = s->work;
        w.n_past = s->target->n_past();
        w.batch.assign(1, s->history.back());
        w.batch.insert(w.batch.end(), w.draft.tokens.begin(), w.draft.tokens.end());
        items_.push_back({s->target, w.batch, true});
        item_owner_.push_back(s);
        report.rows += int(w.batch.size());
    }
    if (items_.empty()) return report;
    report.n_items = int(items_.size());
    report.decoded = !decoding_.empty();
    const auto t0 = clock_type::now();
    eval_target();
    report.pass_ms = ms_since(t0);
    if (report.decoded) cost_.observe(report.rows, report.pass_ms);
    for (size_t k = 0; k < items_.size(); ++k) {
        Sequence& s = *item_owner_[k];
        if (items_[k].all_logits) {
            verify_step(s, report.pass_ms);
        } else if (s.target->n_past() + 1 >= int(s.history.size())) {  // the last prompt chunk
            s.decoding = true;
            if (s.output.empty()) {  // not a resumed one: its times run on from its start
                s.stats.t_prompt_ms = ms_since(s.work.t_start);
                s.work.t_gen = clock_type::now();
            }
        }
    }
    return report;
}

// After the pass: verify, roll back, emit, count.
void Engine::verify_step(Sequence& s, double pass_ms) {
    StepRecord& r = s.rec;
    r.verify_ms = pass_ms;
    const auto t = clock_type::now();
    const Verdict v = verdict(s);
    const Draft& d = s.work.draft;
    s.target->rollback(s.work.n_past + 1 + v.n_accepted);  // drop the rejected drafts
    if (s.drafter) s.drafter->accept(v.n_accepted);
    r.sample_ms = ms_since(t);
    r.n_drafted = d.size();
    r.n_accepted = v.n_accepted;
    const int n_own = s.work.n_own;
    r.n_forced_accepted = std::max(0, v.n_accepted - n_own);
    if (s.params.trace)
        s.stats.trace.push_back({s.stats.n_target_passes, int(s.history.size()), d.tokens,
                                 v.n_accepted, d.size() - n_own});
    for (int i = 0; i < v.n_accepted && !r.stop; ++i) emit(s, {d.tokens[size_t(i)], true}, i);
    if (!r.stop) emit(s, {v.token, false}, v.n_accepted);
    s.stats.add(r);
    if (s.auto_length) {  // it learns the drafter's acceptance: the forced tokens are not its own
        r.n_drafted = n_own;
        r.n_accepted = std::min(v.n_accepted, n_own);
        s.auto_length->observe(r);
        if (s.drafter) s.drafter->observe(r);
        r.n_drafted = d.size();
        r.n_accepted = v.n_accepted;
    }
    if (r.stop) s.stats.stop_reason = r.stop;
}

// The verdict on the step's pass, from the sequence's logit rows.
Verdict Engine::verdict(Sequence& s) {
    Sequence::Work& w = s.work;
    Session& t = *s.target;
    w.rows.clear();
    if (!s.constraints) {
        for (int i = 0; i < t.n_logits(); ++i) w.rows.push_back(t.logits(i));
    } else {
        // Row i checks draft token i: constrained by the history plus drafts 0..i-1.
        Constraints& c = *s.constraints;
        const Constraints::Mark m = c.mark();
        for (int i = 0; i < t.n_logits(); ++i) {
            w.rows.push_back(c.apply(t.logits(i), w.constrained[size_t(i)]));
            if (i < w.draft.size() && !c.accept(w.draft.tokens[size_t(i)])) {
                // The grammar refuses draft i (p = 0 in row i): it is rejected there, and the
                // rows after it are never read.
                while (int(w.rows.size()) < t.n_logits()) w.rows.push_back(w.rows.back());
                break;
            }
        }
        c.rewind(m);
    }
    const LogitRows rows{w.rows, target_.hparams().n_vocab};
    if (s.params.synthetic_accept >= 0.0)
        return verify_synthetic(w.draft, rows, *s.sampler, s.params.synthetic_accept,
                                w.synthetic_rng);
    return verify(w.draft, rows, *s.sampler, *w.scratch);
}

// Appends one generated token, or records why generation stops.
void Engine::emit(Sequence& s, EmittedToken t, int row) {
    StepRecord& r = s.rec;
    if (!s.params.ignore_eos && target_.tokenizer().is_eog(t.id)) {
        r.stop = "eog";
        return;
    }
    if (s.constraints) s.constraints->accept(t.id);
    s.history.push_back(t.id);
    s.output.push_back(t.id);
    r.emitted.push_back(t);
    if (s.on_row) s.on_row(t.id, s.work.rows[size_t(row)]);
    if (s.on_token && !s.on_token(t.id, t.drafted)) {
        r.stop = "callback";
        return;
    }
    if (s.params.n_predict >= 0 && int(s.output.size()) >= s.params.n_predict) r.stop = "n_predict";
}

}  // namespace specula
