// Constraints: see constraints.h.
#include "sampling/constraints.h"

#include "common/error.h"

namespace specula {

Constraints::Constraints(PenaltyParams penalties, int n_vocab,
                         std::shared_ptr<const JsonGrammar> grammar,
                         std::shared_ptr<const GrammarVocab> vocab,
                         std::shared_ptr<const DryBreakers> dry_breakers)
    : pen_(std::move(penalties), n_vocab), vocab_(std::move(vocab)), dry_(std::move(dry_breakers)) {
    const DryParams& dry = pen_.params().dry;
    if (!dry_) {
        if (dry.on() && !dry.sequence_breakers.empty())
            fail("constraints: DRY's sequence breakers need the vocabulary's DryBreakers");
        static const auto none = std::make_shared<const DryBreakers>(std::span<const std::string>{},
                                                                     0, nullptr, nullptr);
        dry_ = none;
    }
    if (grammar) {
        if (!vocab_) fail("constraints: a grammar needs the vocabulary's GrammarVocab");
        if (vocab_->n_vocab() != n_vocab)
            fail("constraints: grammar vocabulary has ", vocab_->n_vocab(), " tokens, the model ",
                 n_vocab);
        grammar_.emplace(std::move(grammar));
        start_ = grammar_;
    }
}

bool Constraints::accept(int32_t token) {
    if (grammar_ && !vocab_->accept(*grammar_, token)) return false;
    pen_.push(token);
    return true;
}

bool Constraints::allows(int32_t token) const {
    return !grammar_ || vocab_->allows(*grammar_, token);
}

void Constraints::rewind(const Mark& m) {
    pen_.truncate(m.n_history);
    if (grammar_ && m.grammar) *grammar_ = *m.grammar;
}

void Constraints::restart() {
    pen_.truncate(0);
    if (grammar_) *grammar_ = *start_;
}

const float* Constraints::apply(const float* logits, std::vector<float>& scratch) const {
    if (!active()) return logits;
    scratch.assign(logits, logits + n_vocab());
    pen_.apply(scratch.data());
    apply_dry(pen_.params().dry, *dry_, pen_.history(), scratch.data());
    if (grammar_) vocab_->mask(*grammar_, scratch.data());
    return scratch.data();
}

}  // namespace specula
