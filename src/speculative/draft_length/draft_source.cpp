// DraftSourceChooser: see draft_source.h.
#include "speculative/draft_length/draft_source.h"

namespace specula {

DraftOption draft_option(const DraftLengthController& source, int n, const PassCost& cost) {
    DraftOption o;
    o.n = n;
    o.tokens = source.expected_tokens(n);
    o.ms = n * source.draft_cost() + cost.cost(n + 1);
    return o;
}

DraftOption best_draft_option(const DraftLengthController& source, int n_max,
                              const PassCost& cost) {
    DraftOption best = draft_option(source, 1, cost);
    for (int n = 2; n <= n_max; ++n) {
        const DraftOption o = draft_option(source, n, cost);
        if (o.rate() > best.rate()) best = o;
    }
    return best;
}

bool prefer_free(const DraftOption& free_draft, const DraftOption& model_draft) {
    return free_draft.rate() >= model_draft.rate();
}

DraftSourceChooser::DraftSourceChooser(const DraftSourceParams& p) : p_(p) {}

DraftSourceChooser::Choice DraftSourceChooser::choose(int n_free, int n_max, const PassCost& cost) {
    if (n_max <= 0) return {};
    const DraftOption model = best_draft_option(model_, n_max, cost);
    const Choice by_model{DraftSource::model, model.n};
    const Choice by_tree{DraftSource::free, n_free};
    Choice c = by_model;
    double best = model.rate();
    if (const double t1 = cost.cost(1); t1 > 0 && 1.0 / t1 > best) c = {}, best = 1.0 / t1;
    if (n_free > 0 && draft_option(free_, n_free, cost).rate() >= best) c = by_tree;
    if (p_.explore_every > 0 && ++n_choices_ % p_.explore_every == 0)
        c = c.source != DraftSource::free && n_free > 0 ? by_tree
            : c.source != DraftSource::model            ? by_model
                                                        : c;
    ++(c.source == DraftSource::free    ? n_free_
       : c.source == DraftSource::model ? n_model_
                                        : n_plain_);
    return c;
}

void DraftSourceChooser::observe(DraftSource source, const StepRecord& step) {
    if (source == DraftSource::none) return;
    DraftLengthController& c = source == DraftSource::free ? free_ : model_;
    c.observe_draft(step.n_draft_steps, step.draft_ms);
    c.observe_accept(step.n_drafted, step.n_accepted);
}

}  // namespace specula
