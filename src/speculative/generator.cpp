// Generator: see generator.h.
#include "speculative/generator.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/error.h"

namespace specula {

Generator::Generator(Session& target, Sampler& sampler, Drafter* drafter, const GenParams& params,
                     DraftLengthController* auto_length, Constraints* constraints)
    : target_(target),
      sampler_(sampler),
      drafter_(drafter),
      params_(params),
      auto_length_(auto_length),
      constraints_(constraints && constraints->active() ? constraints : nullptr),
      synthetic_rng_(sampler.seed() ^ 0x5DEECE66Dull),
      scratch_(target.model().hparams().n_vocab) {
    if (params.n_draft < 0) fail("draft length must be >= 0, got ", params.n_draft);
    if (params.synthetic_accept > 1.0)
        fail("synthetic acceptance must be in [0, 1], got ", params.synthetic_accept);
    const size_t max_batch =
        size_t(std::max(params.n_draft, auto_length ? auto_length->params().n_max : 0)) + 1;
    history_.reserve(size_t(target.n_ctx()) + 1);
    output_.reserve(size_t(target.n_ctx()) + 1);
    draft_.tokens.reserve(max_batch);
    batch_.reserve(max_batch);
    rows_.reserve(max_batch);
    rec_.emitted.reserve(max_batch);
    if (constraints_)
        constrained_.assign(max_batch,
                            std::vector<float>(size_t(target.model().hparams().n_vocab)));
}

SpecStats Generator::generate(std::span<const token_id> prompt, const TokenCallback& on_token) {
    return run(prompt, /*reuse=*/false, on_token);
}

SpecStats Generator::resume(std::span<const token_id> prompt, const TokenCallback& on_token) {
    return run(prompt, /*reuse=*/true, on_token);
}

SpecStats Generator::run(std::span<const token_id> prompt, bool reuse,
                         const TokenCallback& on_token) {
    SpecStats st = start(prompt, /*evaluate=*/true, reuse);
    const auto t_gen = clock_type::now();
    while (st.stop_reason.empty()) {
        if (const char* why = stop_before_step()) {
            st.stop_reason = why;
            break;
        }
        const StepRecord& r = step(on_token);
        st.add(r);
        if (auto_length_) auto_length_->observe(r);
        if (r.stop) st.stop_reason = r.stop;
    }
    st.t_gen_ms = ms_since(t_gen);
    end();
    return st;
}

// Keeps the invariant "target holds all of history but its last token" for a caller that
// continues (tokens after an early stop are dropped).
void Generator::end() {
    target_.rollback(std::min(target_.n_past(), int(history_.size()) - 1));
}

const char* Generator::stop_before_step() const {
    if (params_.n_predict >= 0 && int(output_.size()) >= params_.n_predict) return "n_predict";
    // The target evaluates `last` at position history.size() - 1, plus the drafts.
    if (int(history_.size()) > target_.n_ctx()) return "context";
    return nullptr;
}

// Checks the prompt and (when `evaluate`) evaluates it in the target (all but its last token)
// and the drafter; with `reuse`, only past the prefix the target's cache shares with it.
SpecStats Generator::start(std::span<const token_id> prompt, bool evaluate, bool reuse) {
    if (prompt.empty()) fail("generate: the prompt has no tokens (not even BOS)");
    const int n_ctx = target_.n_ctx();
    if (int(prompt.size()) > n_ctx)
        fail("prompt of ", prompt.size(), " tokens does not fit the context (n_ctx = ", n_ctx, ")");

    SpecStats st;
    st.drafter = drafter_ ? drafter_->name() : "";
    st.synthetic = params_.synthetic_accept >= 0.0 && drafter_;
    st.n_prompt = int(prompt.size());
    // Per-position counters sized up front: the token loop does not allocate.
    st.pos_reached.reserve(rec_.emitted.capacity());
    st.pos_accepted.reserve(rec_.emitted.capacity());
    // The target holds history_'s first n_past() tokens; keep what `prompt` shares with them,
    // leaving at least its last token to evaluate.
    size_t keep = 0;
    if (reuse) {
        const size_t lim = std::min({size_t(target_.n_past()), history_.size(), prompt.size() - 1});
        while (keep < lim && history_[keep] == prompt[keep]) ++keep;
    }
    st.n_prompt_cached = int(keep);
    history_.assign(prompt.begin(), prompt.end());
    output_.clear();
    if (constraints_) {
        constraints_->rewind(Constraints::Mark{});  // no history (penalties only: no grammar)
        constraints_->push_prompt(prompt);
    }
    // Set on every generation, phased or not: a shared drafter must forget an earlier request's.
    if (drafter_) drafter_->guide(constraints_);  // null without constraints
    if (!evaluate) return st;

    const auto t0 = clock_type::now();
    target_.rollback(int(keep));
    if (prompt.size() >= keep + 2)
        target_.eval(prompt.subspan(keep, prompt.size() - 1 - keep), /*all_logits=*/false);
    if (drafter_) reuse ? drafter_->resume(prompt) : drafter_->begin(prompt);
    st.t_prompt_ms = ms_since(t0);
    return st;
}

// One step: draft, verify in one target pass, roll the target back, emit.
const StepRecord& Generator::step(const TokenCallback& on_token) {
    const std::span<const token_id> batch = plan_step();
    const auto t = clock_type::now();
    target_.eval(batch);
    return finish_step(on_token, ms_since(t));
}

int Generator::draft_budget(int n_draft) const {
    int n = std::min(n_draft >= 0 && drafter_ ? n_draft : draft_length(),
                     target_.n_ctx() - int(history_.size()));
    if (params_.n_predict >= 0) n = std::min(n, params_.n_predict - int(output_.size()) - 1);
    return std::max(n, 0);
}

void Generator::reset_record() {
    StepRecord& r = rec_;
    r.emitted.clear();
    r.stop = nullptr;
    r.n_draft_steps = 0;
    r.draft_ms = 0;
}

std::span<const token_id> Generator::plan_step(int n_draft) {
    reset_record();
    const int n = draft_budget(n_draft);
    draft_.clear();
    if (n > 0) propose(n);
    return step_batch();
}

std::span<const token_id> Generator::plan_step_drafted(int steps, double ms) {
    reset_record();
    rec_.n_draft_steps = steps;
    rec_.draft_ms = ms;
    trim_draft(draft_.size());
    return step_batch();
}

// [last, drafts...] at the target's current position.
std::span<const token_id> Generator::step_batch() {
    step_n_past_ = target_.n_past();
    batch_.assign(1, history_.back());
    batch_.insert(batch_.end(), draft_.tokens.begin(), draft_.tokens.end());
    return batch_;
}

const StepRecord& Generator::finish_step(const TokenCallback& on_token, double verify_ms) {
    StepRecord& r = rec_;
    r.verify_ms = verify_ms;
    const auto t = clock_type::now();
    const Verdict v = verify_pass();
    target_.rollback(step_n_past_ + 1 + v.n_accepted);  // drop the rejected drafts
    if (drafter_) drafter_->accept(v.n_accepted);
    r.sample_ms = ms_since(t);
    r.n_drafted = draft_.size();
    r.n_accepted = v.n_accepted;

    for (int i = 0; i < v.n_accepted && !r.stop; ++i) emit({draft_.tokens[i], true}, i, on_token);
    if (!r.stop) emit({v.token, false}, v.n_accepted, on_token);
    return r;
}

int Generator::draft_length() const {
    if (!drafter_) return 0;
    return auto_length_ ? auto_length_->choose() : params_.n_draft;
}

// Asks the drafter for up to n tokens, keeping the prefix the target can verify.
void Generator::propose(int n) {
    const auto t = clock_type::now();
    rec_.n_draft_steps = drafter_->propose(history_, n, draft_);
    rec_.draft_ms = ms_since(t);
    trim_draft(n);
}

// Keeps the prefix of the proposal (at most n tokens) the target can verify.
void Generator::trim_draft(int n) {
    // A draft vocabulary may be up to 128 tokens larger: such ids cannot be verified.
    const int nv = target_.model().hparams().n_vocab;
    int keep = std::min(draft_.size(), n);
    for (int i = 0; i < keep; ++i)
        if (draft_.tokens[i] < 0 || draft_.tokens[i] >= nv) keep = i;
    if (keep < params_.draft_min) keep = 0;  // too short to be worth a wider pass
    draft_.tokens.resize(size_t(keep));
}

// The verdict on the last target pass, from its logit rows.
Verdict Generator::verify_pass() {
    rows_.clear();
    if (!constraints_) {
        for (int i = 0; i < target_.n_logits(); ++i) rows_.push_back(target_.logits(i));
    } else {
        // Row i checks draft token i: constrained by the history plus drafts 0..i-1.
        const Constraints::Mark m = constraints_->mark();
        for (int i = 0; i < target_.n_logits(); ++i) {
            rows_.push_back(constraints_->apply(target_.logits(i), constrained_[size_t(i)]));
            if (i < draft_.size() && !constraints_->accept(draft_.tokens[size_t(i)])) {
                // The grammar refuses draft i (p = 0 in row i): it is rejected there, and the
                // rows after it are never read.
                while (int(rows_.size()) < target_.n_logits()) rows_.push_back(rows_.back());
                break;
            }
        }
        constraints_->rewind(m);
    }
    const LogitRows rows{rows_, target_.model().hparams().n_vocab};
    if (params_.synthetic_accept >= 0.0)
        return verify_synthetic(draft_, rows, sampler_, params_.synthetic_accept, synthetic_rng_);
    return verify(draft_, rows, sampler_, scratch_);
}

// Appends one generated token, or records why generation stops.
void Generator::emit(EmittedToken t, int row, const TokenCallback& on_token) {
    if (!params_.ignore_eos && target_.model().tokenizer().is_eog(t.id)) {
        rec_.stop = "eog";
        return;
    }
    if (constraints_) constraints_->accept(t.id);
    history_.push_back(t.id);
    output_.push_back(t.id);
    rec_.emitted.push_back(t);
    if (row_observer_) row_observer_(t.id, rows_[size_t(row)]);
    if (on_token && !on_token(t.id, t.drafted)) {
        rec_.stop = "callback";
        return;
    }
    if (params_.n_predict >= 0 && int(output_.size()) >= params_.n_predict) rec_.stop = "n_predict";
}

std::vector<token_id> generate_tokens(Session& target, Sampler& sampler, Drafter* drafter,
                                      std::span<const token_id> prompt, const GenParams& params,
                                      SpecStats* stats) {
    Generator gen(target, sampler, drafter, params);
    SpecStats st = gen.generate(prompt);
    if (stats) *stats = st;
    return gen.output();
}

}  // namespace specula
