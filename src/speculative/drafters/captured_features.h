// The target's features for a drafter that reads them (EAGLE-3, DFlash): the rows a target session
// captured at the layers the drafter names (SessionParams::capture_layers), gathered per position
// into one row of the drafter's feature width.
#pragma once

#include <span>
#include <vector>

namespace specula {

class Session;

// out = the features of positions pos .. L - 1: position p's captured row is the target's
// row `last - (L - 1 - p)`, and its layer k (column[k] units of target_embd into the captured row)
// lands at k * target_embd of the position's out row (column.size() * target_embd values).
void gather_captured_features(const Session& target, int last, int pos, int L,
                              std::span<const int> column, int target_embd,
                              std::vector<float>& out);

}  // namespace specula
