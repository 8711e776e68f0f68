// Generator: see generator.h.
#include "speculative/generator.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace specula {

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

}  // namespace

Generator::Generator(Session& target, Sampler& sampler, Drafter* drafter, const GenParams& params)
    : target_(target),
      sampler_(sampler),
      drafter_(drafter),
      params_(params),
      ctl_(params.auto_params),
      synthetic_rng_(sampler.seed() ^ 0x5DEECE66Dull),
      scratch_(target.model().hparams().n_vocab) {
    if (params.n_draft < 0) fail("draft length must be >= 0, got ", params.n_draft);
    if (params.synthetic_accept > 1.0)
        fail("synthetic acceptance must be in [0, 1], got ", params.synthetic_accept);
    history_.reserve(size_t(target.n_ctx()) + 1);
    output_.reserve(size_t(target.n_ctx()) + 1);
    const size_t max_batch = size_t(std::max(params.n_draft, params.auto_params.n_max)) + 1;
    draft_.tokens.reserve(max_batch);
    batch_.reserve(max_batch);
    rows_.reserve(max_batch);
}

// The verdict on the last target pass, from its logit rows.
Verdict Generator::verify_pass() {
    rows_.clear();
    for (int i = 0; i < target_.n_logits(); ++i) rows_.push_back(target_.logits(i));
    const LogitRows rows{rows_, target_.model().hparams().n_vocab};
    if (params_.synthetic_accept >= 0.0)
        return verify_synthetic(draft_, rows, sampler_, params_.synthetic_accept, synthetic_rng_);
    return verify(draft_, rows, sampler_, scratch_);
}

int Generator::draft_length_for_step() const {
    if (!drafter_) return 0;
    return params_.draft_auto ? ctl_.choose() : params_.n_draft;
}

// Appends one generated token; false when generation must stop.
bool Generator::emit(token_id tok, const TokenCallback& on_token, SpecStats& st) {
    if (!params_.ignore_eos && target_.model().tokenizer().is_eog(tok)) {
        st.stop_reason = "eog";
        return false;
    }
    history_.push_back(tok);
    output_.push_back(tok);
    ++st.n_generated;
    if (on_token && !on_token(tok)) {
        st.stop_reason = "callback";
        return false;
    }
    if (params_.n_predict >= 0 && st.n_generated >= params_.n_predict) {
        st.stop_reason = "n_predict";
        return false;
    }
    return true;
}

SpecStats Generator::generate(std::span<const token_id> prompt, const TokenCallback& on_token) {
    if (prompt.empty()) fail("generate: the prompt has no tokens (not even BOS)");
    const int n_ctx = target_.n_ctx();
    if (int(prompt.size()) > n_ctx)
        fail("prompt of ", prompt.size(), " tokens does not fit the context (n_ctx = ", n_ctx, ")");

    SpecStats st;
    st.drafter = drafter_ ? drafter_->name() : "";
    st.synthetic = params_.synthetic_accept >= 0.0 && drafter_;
    st.n_prompt = int(prompt.size());
    // Per-position counters sized up front: the token loop does not allocate.
    const int max_draft =
        std::max(params_.n_draft, params_.draft_auto ? params_.auto_params.n_max : 0);
    st.pos_reached.reserve(size_t(std::max(max_draft, 0)));
    st.pos_accepted.reserve(size_t(std::max(max_draft, 0)));
    history_.assign(prompt.begin(), prompt.end());
    output_.clear();

    auto t0 = clock_type::now();
    target_.reset();
    if (prompt.size() >= 2) target_.eval(prompt.first(prompt.size() - 1), /*all_logits=*/false);
    if (drafter_) drafter_->begin(prompt);
    st.t_prompt_ms = ms_since(t0);

    const auto t_gen = clock_type::now();
    bool running = params_.n_predict != 0;
    if (!running) st.stop_reason = "n_predict";
    while (running) {
        // The target evaluates `last` at position history.size() - 1, plus the drafts.
        const int room = n_ctx - int(history_.size());
        if (room < 0) {
            st.stop_reason = "context";
            break;
        }
        int n = std::min(draft_length_for_step(), room);
        if (params_.n_predict >= 0) n = std::min(n, params_.n_predict - st.n_generated - 1);

        draft_.clear();
        if (n > 0) {
            auto t = clock_type::now();
            const int steps = drafter_->propose(history_, n, draft_);
            const double ms = ms_since(t);
            st.t_draft_ms += ms;
            st.n_draft_steps += steps;
            ctl_.observe_draft(steps, ms);
            // A draft vocabulary may be up to 128 tokens larger: such ids cannot be verified.
            const int nv = target_.model().hparams().n_vocab;
            int keep = std::min(draft_.size(), n);
            for (int i = 0; i < keep; ++i)
                if (draft_.tokens[i] < 0 || draft_.tokens[i] >= nv) keep = i;
            if (keep < params_.draft_min) keep = 0;  // too short to be worth a wider pass
            draft_.tokens.resize(size_t(keep));
        }

        // The target evaluates [last, drafts] in one pass.
        const int n_past = target_.n_past();
        auto t = clock_type::now();
        batch_.assign(1, history_.back());
        batch_.insert(batch_.end(), draft_.tokens.begin(), draft_.tokens.end());
        target_.eval(batch_);
        const double ms_verify = ms_since(t);
        st.t_verify_ms += ms_verify;
        ctl_.observe_target(draft_.size() + 1, ms_verify);

        t = clock_type::now();
        const Verdict r = verify_pass();
        target_.rollback(n_past + 1 + r.n_accepted);  // drop the rejected drafts
        if (drafter_) drafter_->accept(r.n_accepted);
        const double ms_sample = ms_since(t);
        st.t_sample_ms += ms_sample;
        ctl_.observe_overhead(ms_sample);
        ctl_.observe_accept(draft_.size(), r.n_accepted);
        st.add_pass(draft_.size(), r.n_accepted);

        for (int i = 0; i < r.n_accepted && running; ++i)
            running = emit(draft_.tokens[i], on_token, st);
        if (running) running = emit(r.token, on_token, st);
    }
    st.t_gen_ms = ms_since(t_gen);
    // Keep the invariant "target holds all of history but its last token" for a caller that
    // continues (tokens after an early stop are dropped).
    target_.rollback(std::min(target_.n_past(), int(history_.size()) - 1));
    return st;
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
