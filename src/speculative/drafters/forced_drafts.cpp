// Forced drafts: see forced_drafts.h.
#include "speculative/drafters/forced_drafts.h"

#include "sampling/constraints.h"

namespace specula {

int append_forced_drafts(const Constraints& c, Draft& draft, int n_max, std::string& bytes,
                         std::vector<token_id>& tokens) {
    const GrammarVocab* vocab = c.vocab();
    if (!vocab || draft.size() >= n_max) return 0;
    GrammarState st(*c.grammar());
    for (token_id t : draft.tokens)
        if (!vocab->accept(st, t)) return 0;  // rejected there anyway
    tokens.clear();
    const int n = vocab->forced_tokens(st, n_max - draft.size(), bytes, tokens);
    for (int i = 0; i < n; ++i) {
        const token_id t = tokens[size_t(i)];
        if (draft.has_q) {
            std::vector<TokenProb>& q = draft.next_q();
            q.clear();
            q.push_back({t, 1.f});
        }
        draft.tokens.push_back(t);
    }
    return n;
}

}  // namespace specula
