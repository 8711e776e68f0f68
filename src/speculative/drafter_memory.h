// What a speculative setup's drafter holds besides a draft model, as parts of the memory plan
// (model/memory_plan.h's DrafterPart; the draft model itself is the plan's "draft weights" and
// "draft KV"):
//   - an EAGLE-3 head: its weights (the file's tensors, mapped, with the repacked copies and the
//     F32 norms made at load), and per sequence its one-layer KV cache over the context (the
//     target's -ctk / -ctv);
//   - a DFlash drafter: its weights (as an EAGLE-3 head's), and per sequence its KV cache of every
//     layer over the context plus one block;
//   - Gemma 4's assistant: its weights (it attends over the target's cache: none of its own);
//   - Medusa heads: their weights;
//   - suffix decoding: the shared tree's bound (--spec-suffix-cache-mb), and per sequence its own
//     tree over its prompt and output, at most max_depth nodes per token of the context.
#pragma once

#include <vector>

#include "model/memory_plan.h"
#include "speculative/make_drafter.h"

namespace specula {

// The parts for sequences of n_ctx positions with KV caches of the given types; empty for a
// drafter that holds nothing besides a draft model (or for none).
std::vector<DrafterPart> drafter_memory(const SpeculativeSetup& setup, int n_ctx, KVType type_k,
                                        KVType type_v);

// The weights a head file brings: its tensors (mapped), repacked copies and F32 copies.
double head_weight_bytes(const GGUFFile& file, const std::vector<PackedBuffer>& packed,
                         const ModelWeights& owned);

}  // namespace specula
