// Constraints: everything that reshapes a logit row from the sequence so far, applied before the
// Sampler's top-k / top-p / min-p / temperature: logit bias and penalties (penalties.h), DRY
// (dry.h), then the grammar mask (grammar_vocab.h). One object per sequence; a drafter keeps its
// own copy.
//
// Plain decoding, per token:
//     const float* row = c.apply(session.logits(last), scratch);
//     token = sampler.sample(row, n_vocab);
//     c.accept(token);                        // (an EOG token: generation ends)
// Speculative decoding (exact when draft and target use the same Constraints state per position):
//   drafter: m = c.mark(); for each draft token: q_i = distribution(c.apply(row_i)); draw d_i;
//            c.accept(d_i); then c.rewind(m).
//   verifier: m = c.mark(); for i in 0..n: rows[i] = c.apply(target.logits(i), scratch[i]);
//            if i < n and !c.accept(d_i): stop (d_i has p = 0 and is rejected at i);
//            decide on the rows; c.rewind(m); c.accept() each kept token and the next one.
//   forced drafts (speculative/drafters/forced_drafts.h): after the drafter's tokens, the
//            tokens the grammar alone forces (GrammarVocab::forced_tokens on a copy of
//            grammar()) are drafted too, with a one-hot q; the verifier checks them like any
//            other.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "sampling/grammar_state.h"
#include "sampling/grammar_vocab.h"
#include "sampling/penalties.h"

namespace specula {

class Constraints {
  public:
    // grammar may be null (no structured output); vocab is required with a grammar and must
    // have n_vocab tokens. dry_breakers: penalties.dry's sequence breakers as tokens, required
    // when DRY is on with breakers. Throws specula::Error for bad penalty values (naming the
    // field).
    Constraints(PenaltyParams penalties, int n_vocab,
                std::shared_ptr<const JsonGrammar> grammar = nullptr,
                std::shared_ptr<const GrammarVocab> vocab = nullptr,
                std::shared_ptr<const DryBreakers> dry_breakers = nullptr);

    bool active() const { return pen_.active() || grammar_.has_value(); }
    bool has_grammar() const { return grammar_.has_value(); }
    int n_vocab() const { return pen_.n_vocab(); }

    // Prompt tokens: counted by the penalties (as llama.cpp does), not matched by the grammar.
    void push_prompt(std::span<const int32_t> tokens) { pen_.push(tokens); }
    // A sampled / drafted token: the grammar advances and the penalties count it. Returns false,
    // changing nothing, when the grammar refuses it. An end-of-generation token is accepted when
    // the grammar is complete (it stays complete).
    bool accept(int32_t token);
    // Whether the grammar (if any) allows `token` next.
    bool allows(int32_t token) const;
    // No grammar, or its output is complete (an end-of-generation token may follow).
    bool can_end() const { return !grammar_ || grammar_->can_end(); }

    struct Mark {
        size_t n_history = 0;
        std::optional<GrammarState> grammar;
    };
    Mark mark() const { return Mark{pen_.size(), grammar_}; }
    void rewind(const Mark& m);
    // Forgets the history: no tokens counted, the grammar (if any) back at its start. A
    // generation starts here (a conversation's next reply is a new JSON value under -j).
    void restart();

    // The row to sample at the current position: `logits` itself when nothing is active, else
    // a copy in `scratch` with bias, penalties, DRY and the grammar mask (-inf) applied.
    const float* apply(const float* logits, std::vector<float>& scratch) const;

    const Penalizer& penalties() const { return pen_; }
    const GrammarState* grammar() const { return grammar_ ? &*grammar_ : nullptr; }
    const GrammarVocab* vocab() const { return grammar_ ? vocab_.get() : nullptr; }

  private:
    Penalizer pen_;
    std::optional<GrammarState> grammar_;
    std::optional<GrammarState> start_;  // grammar_ before any token
    std::shared_ptr<const GrammarVocab> vocab_;
    std::shared_ptr<const DryBreakers> dry_;  // never null (empty: no breakers)
};

}  // namespace specula
