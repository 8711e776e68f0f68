// Drafter: see drafter.h.
#include "speculative/drafters/drafter.h"

#include "model/session.h"

namespace specula {

int Drafter::propose(std::span<const token_id> history, int n_max, Draft& out) {
    for (std::span<const token_id> todo = start(history, n_max, out); !todo.empty();
         todo = next(out)) {
        if (Session* head = head_session())
            head->eval_mtp(todo, head_hidden());
        else
            session()->eval(todo, /*all_logits=*/false);  // only the last token's prediction
    }
    return steps();
}

}  // namespace specula
