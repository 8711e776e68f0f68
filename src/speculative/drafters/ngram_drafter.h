// NgramDrafter: prompt-lookup drafting without a model. It takes the last n tokens of the
// history (n from ngram_max down to ngram_min), finds their latest earlier occurrence in the
// history (prompt + output) and proposes the tokens that followed it. Proposals are deterministic
// (q is one-hot), so they work for greedy and sampling verification alike.
#pragma once

#include "speculative/drafters/drafter.h"

namespace specula {

struct NgramParams {
    int ngram_min = 2;  // 1-grams match too often in small vocabularies to be worth a pass
    int ngram_max = 4;
};

class NgramDrafter final : public Drafter {
  public:
    explicit NgramDrafter(const NgramParams& params);

    const char* name() const override { return "ngram"; }
    void begin(std::span<const token_id> prompt) override {}
    // Proposes at once: nothing for the engine to evaluate.
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override;
    void accept(int n_kept) override {}

  private:
    // Start of the latest earlier occurrence of the last n tokens (followed by at least one
    // token), or -1.
    static long find_latest(std::span<const token_id> history, int n);

    NgramParams params_;
};

}  // namespace specula
