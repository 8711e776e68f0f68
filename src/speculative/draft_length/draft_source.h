// Draft source and length by cost (`--draft auto` with two chained drafters: --spec-type suffix
// -md DRAFT): each step, the free draft (a suffix tree's: no model pass), the model's at its best
// length, or none (a plain pass), whichever is expected to produce the most tokens per
// millisecond,
//
//   rate = E(n) / T(n),  E(n) = 1 + sum_{k=1..n} prod_{i=1..k} a_i,
//                        T(n) = n * t_step + t_target(n + 1)
//
// where a_i is that source's own running acceptance at draft position i (a DraftLengthController
// fed only with the steps that source drafted), t_step its measured cost per draft evaluation
// (0 for the free source: it never runs one) and t_target the engine's pass-cost model
// (pass_cost.h); a plain pass is E = 1 over t_target(1). The model's option is its best length
// in 1..n_max; the free draft is the one the tree offers. So the model's draft wins only when its
// better acceptance pays for its passes, and the tree's free drafts are never held back by the
// model's cost (one length controller over both would charge them the model's passes).
//  - Exploration: every explore_every-th choice takes the best drafting source other than the
//    winner (the tree when it has a draft, else the model), so that the losing source's
//    acceptance stays measured: a text that turns repetitive brings the tree back, one that
//    stops repeating brings the model back, and drafting comes back after plain passes.
//  - Before any target pass is measured the costs are unknown and the caller keeps its own rule.
#pragma once

#include "speculative/draft_length/draft_length.h"
#include "speculative/draft_length/pass_cost.h"
#include "speculative/draft_length/step_record.h"

namespace specula {

// What one source's draft of n tokens is expected to give.
struct DraftOption {
    int n = 0;          // draft tokens (0: no draft)
    double tokens = 1;  // E(n): tokens per target pass
    double ms = 0;      // T(n): the step's drafting and target pass
    double rate() const { return ms > 0 ? tokens / ms : 0; }
};

// The option of a draft of n tokens from `source` (its acceptance and draft-step cost).
DraftOption draft_option(const DraftLengthController& source, int n, const PassCost& cost);
// The best option of 1..n_max tokens from `source` (the shortest among equal rates).
DraftOption best_draft_option(const DraftLengthController& source, int n_max, const PassCost& cost);
// Whether the free option beats the model's (a tie goes to the free draft).
bool prefer_free(const DraftOption& free_draft, const DraftOption& model_draft);

enum class DraftSource { none, free, model };

struct DraftSourceParams {
    int explore_every = 16;  // 0: never explore
};

class DraftSourceChooser {
  public:
    explicit DraftSourceChooser(const DraftSourceParams& p = {});

    struct Choice {
        DraftSource source = DraftSource::none;
        int n = 0;  // the model's draft length (the free draft keeps its own)
    };
    // This step's source: n_free the free draft's length (0: the tree has none), n_max the most
    // the model may draft (0: none may). Needs cost.measured(). DraftSource::none: a plain pass.
    Choice choose(int n_free, int n_max, const PassCost& cost);
    // The step that `source` drafted (drafted / accepted counts of that source's tokens only).
    void observe(DraftSource source, const StepRecord& step);

    const DraftLengthController& free_source() const { return free_; }
    const DraftLengthController& model_source() const { return model_; }
    long n_free() const { return n_free_; }    // steps the free draft was chosen
    long n_model() const { return n_model_; }  // ... the model's
    long n_plain() const { return n_plain_; }  // ... and none

  private:
    DraftSourceParams p_;
    DraftLengthController free_, model_;
    long n_choices_ = 0, n_free_ = 0, n_model_ = 0, n_plain_ = 0;
};

}  // namespace specula
