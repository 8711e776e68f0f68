// Forced drafts: tokens a grammar forces are proposed as drafts, so they cost no target pass of
// their own. Under structured output (sampling/constraints.h with a JSON grammar) long stretches
// of the output have one legal continuation: the keys of an object whose properties are fixed, the
// rest of an enum value or a const, closing brackets, the end-of-generation token once the JSON is
// closed (GrammarVocab::forced_tokens says which tokens). The engine's step (engine.h) appends
// them to each sequence's draft after its drafter's tokens, or makes them the whole draft when the
// sequence has no drafter or the drafter proposed nothing, and the target verifies them in the
// same pass as the rest.
//
// Exactness does not depend on the forced tokens being right: the verifier checks every draft
// token against the target's constrained row. A forced token is a deterministic function of the
// history and the tokens drafted before it, so its draft distribution is one-hot: with sampled
// drafts (Draft::has_q) its q is {token: 1}, and the rejection rule accepts it with probability
// p(token) and otherwise draws from p without it, which is exactly the target's distribution; the
// drafter's own tokens keep their own q. Greedy output stays the target's greedy output.
#pragma once

#include <string>
#include <vector>

#include "speculative/drafters/drafter.h"

namespace specula {

class Constraints;

// Appends to `draft` the tokens the grammar of `c` forces after the draft's own tokens, up to
// n_max tokens in the whole draft, and returns how many it appended (0 without a grammar, when
// the grammar refuses one of the draft's tokens, or when nothing is forced). `c` is not changed.
// `bytes` and `tokens` are scratch (they keep their capacity).
int append_forced_drafts(const Constraints& c, Draft& draft, int n_max, std::string& bytes,
                         std::vector<token_id>& tokens);

}  // namespace specula
