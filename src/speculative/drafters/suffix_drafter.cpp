// SuffixCache and SuffixDrafter: see suffix_drafter.h.
#include "speculative/drafters/suffix_drafter.h"

#include <algorithm>

namespace specula {

namespace {

SuffixLimits limits_of(const SuffixParams& p) {
    return {p.min_match, p.max_spec_factor, p.min_token_prob};
}

const SuffixParams& checked(const SuffixParams& p) {
    check_suffix_params(p);
    return p;
}

}  // namespace

SuffixCache::SuffixCache(const SuffixParams& params)
    : params_(checked(params)), tree_(params.max_depth) {}

void SuffixCache::add_output(std::span<const token_id> output) {
    if (output.empty() || params_.max_cached_requests == 0) return;
    std::lock_guard lock(mu_);
    const size_t per_token = SuffixTree::bytes_per_token(params_.max_depth);
    // Of an output the bound cannot hold whole, its last part (a floor of kSuffixMinOutput
    // tokens always fits: check_suffix_params).
    const size_t fits = params_.cache_bytes / per_token;
    if (output.size() > fits) output = output.last(fits);
    const size_t need = output.size() * per_token;
    while (!outputs_.empty() && (int(outputs_.size()) >= params_.max_cached_requests ||
                                 tree_.bytes() + need > params_.cache_bytes)) {
        tree_.remove(outputs_.front());
        outputs_.pop_front();
    }
    if (outputs_.empty()) tree_.clear();  // also returns the freed nodes' memory
    outputs_.emplace_back(output.begin(), output.end());
    tree_.add(outputs_.back());
}

SuffixMatch SuffixCache::match(std::span<const token_id> history, int n_max,
                               const SuffixLimits& limits) const {
    std::lock_guard lock(mu_);
    return tree_.match(history, n_max, limits);
}

size_t SuffixCache::bytes() const {
    std::lock_guard lock(mu_);
    return tree_.bytes();
}

int SuffixCache::n_outputs() const {
    std::lock_guard lock(mu_);
    return int(outputs_.size());
}

SuffixDrafter::SuffixDrafter(const SuffixParams& params, std::shared_ptr<SuffixCache> cache,
                             std::unique_ptr<Drafter> model)
    : params_(checked(params)),
      limits_(limits_of(params)),
      cache_(std::move(cache)),
      model_(std::move(model)),
      own_(params.max_depth),
      appender_(own_) {}

void SuffixDrafter::attach(Session* target) {
    if (model_) model_->attach(target);
}

void SuffixDrafter::restart() {
    own_.clear();
    appender_.reset();
    fed_ = 0;
    by_model_ = false;
}

void SuffixDrafter::begin(std::span<const token_id> prompt) {
    restart();
    if (model_) model_->begin(prompt);
}

void SuffixDrafter::resume(std::span<const token_id> prompt) {
    restart();
    if (model_) model_->resume(prompt);
}

std::span<const token_id> SuffixDrafter::ask_model(std::span<const token_id> history, int n,
                                                   Draft& out) {
    by_model_ = true;
    model_->guide(guide_);
    return model_->start(history, n, out);
}

std::span<const token_id> SuffixDrafter::start(std::span<const token_id> history, int n_max,
                                               Draft& out) {
    out.clear();
    out.has_q = false;
    by_model_ = false;
    source_ = DraftSource::none;
    for (; fed_ < history.size(); ++fed_) appender_.push(history[fed_]);
    if (n_max <= 0) return {};
    SuffixMatch best = own_.match(history, n_max, limits_);
    if (cache_) {
        SuffixMatch shared = cache_->match(history, n_max, limits_);
        if (shared.score > best.score) best = std::move(shared);
    }
    const bool matched = !best.tokens.empty() && best.match_len >= params_.min_match;
    if (model_ && costs_ && costs_->measured()) {  // --draft auto: by measured cost
        const auto c = chooser_.choose(matched ? int(best.tokens.size()) : 0, n_max, *costs_);
        source_ = c.source;
        if (c.source == DraftSource::model) return ask_model(history, c.n, out);
        if (c.source == DraftSource::free) out.tokens = std::move(best.tokens);
        return {};  // DraftSource::none: a plain pass does better
    }
    if (matched) {
        out.tokens = std::move(best.tokens);
        return {};
    }
    if (!model_) return {};
    return ask_model(history, n_max, out);
}

std::span<const token_id> SuffixDrafter::next(Draft& out) {
    return by_model_ ? model_->next(out) : std::span<const token_id>{};
}

void SuffixDrafter::accept(int n_kept) {
    // A model that sat this step out catches up on the history at its next proposal.
    if (by_model_) model_->accept(n_kept);
}

void SuffixDrafter::observe(const StepRecord& step) {
    chooser_.observe(source_, step);
    source_ = DraftSource::none;  // a step without a proposal (length 0) is nobody's
}

void SuffixDrafter::end(std::span<const token_id> history, int n_prompt) {
    if (cache_ && n_prompt >= 0 && size_t(n_prompt) < history.size())
        cache_->add_output(history.subspan(size_t(n_prompt)));
    if (model_) model_->end(history, n_prompt);
}

}  // namespace specula
