// Internal to model/: the pass driver. A ForwardPass owns a pass's state
// (model/blocks/pass_state.h) and runs passes over it: the token embeddings, each layer's block
// (ArchSpec::block, over the shared blocks of model/blocks/blocks.h and the architecture's own
// steps), the final norm and the output matmul, and what drafters take from a pass (the MTP head's
// input rows, the hidden states at the layers a session captures). Its buffers grow to the largest
// pass seen and are reused.
#pragma once

#include <span>

#include "model/blocks/pass_state.h"

namespace specula {

class ForwardPass {
  public:
    explicit ForwardPass(const Model& model);

    // Evaluates every segment's tokens in ONE pass over the weights (each matmul takes all rows),
    // appends them to their caches, and leaves each segment's logits in its Session. The
    // segments must be checked already and belong to distinct sessions of this model.
    void run(std::span<const PassSegment> segs, ThreadPool& pool);

    // The MTP head (ModelWeights::mtp, ArchSpec::mtp_block) over every segment in ONE pass (each
    // row attends over its own session's head cache): see Session::eval_mtp. Checked already;
    // distinct sessions. Every input row is read before any output is written (a hidden input
    // may be a session's own mtp_hidden).
    void run_mtp(std::span<const MtpSegment> segs, ThreadPool& pool);

    const HParams& hparams() const { return st_.hp; }
    const Model& model() const { return st_.model; }

    // What the buffers of a pass of ntok rows (logit_rows of them through the pass's own logits
    // buffer: a pass over several sequences) take, in bytes (the memory plan's figure), and what
    // this pass holds now (they grow to the largest pass seen; tests hold the two together).
    double buffer_bytes(int ntok, int logit_rows);
    double allocated_bytes() const;

  private:
    // Sizes the buffers for a pass of ntok rows, logit_rows of them copied through st_.logits.
    void reserve(int ntok, int logit_rows, int max_ctx, int n_threads);
    // f(buffer, floats) for each buffer reserve sizes by the pass's rows (not scores, which the
    // memory plan counts with the KV cache): the one list reserve and buffer_bytes read.
    template <class F>
    void each_buffer(int ntok, int logit_rows, F&& f);
    // Sets the per-segment rows of segs (all rows output rows when all_out).
    void lay_out(std::span<const PassSegment> segs);
    // The token embeddings and rope angles of every row.
    void embed(std::span<const PassSegment> segs);
    // Copies layer il's output rows into the sessions that capture it.
    void capture(int il);
    // The final norm, the MTP head's input rows, the output matmul, each session's logits.
    void output(std::span<const PassSegment> segs, ThreadPool& pool);
    // The rope frequency factors of a session with an n_ctx context (or nullptr).
    const float* rope_factors(int n_ctx) const;

    PassState st_;
    std::vector<int64_t> arch_widths_;    // ArchSpec::scratch: per-row floats of each st_.arch
    std::vector<float> mtp_cat_;          // the MTP head's [enorm(embed) | hnorm(hidden)] rows
    std::vector<PassSegment> pass_segs_;  // run_mtp's segments as the blocks see them
};

}  // namespace specula
