// MedusaHeads: Medusa draft heads (arXiv:2401.10774; vLLM's "medusa") in a GGUF of architecture
// "medusa", bound to the target they draft for, and their forward.
//
// The file (Specula's layout; scripts/models/medusa_convert.py writes it from the Hugging Face /
// vLLM checkpoint, docs/speculative.md):
//   general.architecture      "medusa"
//   medusa.head_count         k, 1..16: head i predicts the token i + 2 places after the last
//                             hidden state's (the target's own head predicts the next one)
//   medusa.block_count        residual blocks per head (default 1), 1..8
//   medusa.embedding_length   the target's hidden size
//   medusa.vocab_size         the target's vocabulary (optional; checked when given)
//   tensors, per head i and block j:
//     medusa.{i}.blk.{j}.weight  [d x d], medusa.{i}.blk.{j}.bias [d]: x <- x + SiLU(W x + b)
//     medusa.{i}.output.weight   [d x n_vocab], optional: absent, the head uses the target's
//                                output matrix (a shared lm_head)
// The input is the target's final hidden state after its output norm (what Medusa's heads read in
// the reference and vLLM): Session::hidden(row), which the model library keeps today only for a
// target with an MTP head (load_speculative refuses the others until it keeps them for any).
//
// Load refuses, naming the key and both files, a head count of 0 or over 16, a block count
// outside 1..8, a hidden size or vocabulary that is not the target's; a missing or misshapen
// tensor is refused naming the tensor and the file.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/threadpool.h"
#include "kernels/matmul.h"
#include "model/load/model.h"

namespace specula {

constexpr int kMaxMedusaHeads = 16;

struct MedusaHeads {
    static std::unique_ptr<MedusaHeads> load(const std::string& path, const Model& target);

    struct Head {
        std::vector<WeightView> w;
        std::vector<const float*> b;
        WeightView output;  // the head's own, else the target's
    };
    std::unique_ptr<GGUFFile> file;
    const Model* target = nullptr;
    int n_embd = 0;
    std::vector<Head> heads;
    ModelWeights owned;  // F32 copies of vectors stored in other types
};

// Scratch of one forward over one or more sequences' rows (grows once).
struct MedusaState {
    MatmulScratch mm;
    std::vector<float> h, x, y, logits;
    std::vector<int> active, head;  // row r: head head[r] of sequence active[r]
};

// The heads' greedy drafts from one final hidden state (n_embd floats, after the target's output
// norm): out[i] = argmax of head i's logits, for the first n heads. With `logits`, head i's
// logits (n_vocab each) are copied there too (for tests).
void medusa_draft(const MedusaHeads& m, MedusaState& st, const float* hidden, int n,
                  std::vector<token_id>& out, ThreadPool& pool,
                  std::vector<float>* logits = nullptr);

// medusa_draft for several sequences at once (a server's slots): sequence s drafts up to n[s]
// tokens from hidden[s] into *out[s]. Each head's blocks run as ONE matmul over the rows of every
// sequence still drafting at that head, and an output matrix the heads share (the target's, when
// the file has none of its own) as ONE matmul over every head's rows, so the weights are read once
// per step instead of once per sequence and head; each sequence gets the drafts medusa_draft
// gives it alone (the kernels are batch-invariant).
void medusa_draft_rows(const MedusaHeads& m, MedusaState& st, std::span<const float* const> hidden,
                       std::span<const int> n, std::span<std::vector<token_id>* const> out,
                       ThreadPool& pool);

}  // namespace specula
