// Gemma4AssistantDrafter: see gemma4_assistant.h.
#include "speculative/drafters/gemma4_assistant.h"

#include "model/session.h"
#include "sampling/constraints.h"

namespace specula {

Gemma4AssistantDrafter::Gemma4AssistantDrafter(const Gemma4Assistant& assistant,
                                               const SamplingParams& sampling, float p_min)
    : a_(assistant),
      chooser_(sampling, 0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full),
      p_min_(p_min) {}

std::span<const token_id> Gemma4AssistantDrafter::start(std::span<const token_id> history,
                                                        int n_max, Draft& out) {
    out.clear();
    out.has_q = !chooser_.greedy();
    steps_ = 0;
    if (n_max <= 0 || !target_) return {};
    Session& t = *target_;
    const int L = int(history.size()) - 1;
    const int n_rows = t.n_logits();
    const int row = row_ < 0 ? n_rows - 1 : row_;
    // No pass since the sequence began (a prompt the cache held whole), a row out of reach, or a
    // cache that does not end where the history does: nothing to draft from this step.
    if (L < 1 || t.n_past() != L || row < 0 || row >= n_rows) return {};
    const int nv = a_.target->hparams().n_vocab;
    Constraints* guide = guide_ && guide_->n_vocab() == nv ? guide_ : nullptr;
    Constraints::Mark mark;
    if (guide) mark = guide->mark();
    const float* hidden = t.hidden(row);
    h_.assign(hidden, hidden + a_.n_backbone);
    token_id tok = history[size_t(L)];
    ThreadPool& pool = t.pool();
    while (out.size() < n_max) {
        gemma4_assistant_step(a_, st_, t.kv(), L, tok, h_.data(), pool);
        ++steps_;
        tok = chooser_.choose(st_.logits.data(), nv, out, guide, p_min_);
        if (tok < 0) break;
        out.tokens.push_back(tok);
        h_.swap(st_.hidden);
    }
    if (guide) guide->rewind(mark);
    return {};  // the whole proposal ran here
}

}  // namespace specula
