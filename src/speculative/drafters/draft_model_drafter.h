// DraftModelDrafter: proposes tokens with a small draft model running in its own Session.
//
// Its KV cache always holds a prefix of the generation history: after a verification it rolls
// back past the rejected tokens, and the next proposal first evaluates only the tokens it has not
// seen (the target's correction or bonus token, usually 1-2 tokens) in one batch, never
// re-evaluating what it already has. Greedy targets get greedy drafts (argmax, q one-hot);
// sampling targets get tokens drawn from the draft's own transformed distribution q, which is kept
// for rejection sampling.
//
// p_min (--draft-p-min) stops a proposal early when the draft's most likely next token has
// probability below p_min (softmax of the raw logits when greedy, of q when sampling). The default
// is 0.0 (always draft the requested length) so that a fixed N means N, as llama-speculative does;
// `--draft auto` chooses the length from measured acceptance instead.
#pragma once

#include <memory>
#include <vector>

#include "model/session.h"
#include "sampling/constraints.h"
#include "speculative/drafters/draft_chooser.h"
#include "speculative/drafters/drafter.h"

namespace specula {

struct DraftModelParams {
    int n_ctx = 0;      // 0: the draft model's training context
    int n_threads = 0;  // 0: hardware concurrency (unused with `pool`)
    float p_min = 0.0f;
    SamplingParams sampling;      // the target's sampling parameters (temp <= 0: greedy drafting)
    KVType type_k = KVType::F32;  // the draft's KV cache types
    KVType type_v = KVType::F32;
    ThreadPool* pool = nullptr;  // a pool shared with other sessions (SessionParams::pool)
    std::shared_ptr<ForwardPass> shared_pass;      // SessionParams::shared_pass
    bool kv_small_pages = false;                   // SessionParams::kv_small_pages
    int n_ubatch = SessionParams::kDefaultUbatch;  // SessionParams::n_ubatch
};

class DraftModelDrafter final : public Drafter {
  public:
    DraftModelDrafter(const Model& draft, const DraftModelParams& params);

    const char* name() const override { return "draft-model"; }
    void begin(std::span<const token_id> prompt) override;
    // Keeps the cache: the next proposal rolls it back to the prefix shared with the history and
    // evaluates only the rest (sync).
    void resume(std::span<const token_id> prompt) override { n_history_ = 0; }
    // The first round evaluates what the cache lacks of the history (usually the target's last
    // token or two), each further round one draft token.
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override;
    std::span<const token_id> next(Draft& out) override;
    Session* session() override { return session_.get(); }
    int steps() const override { return steps_; }
    void accept(int n_kept) override;

    // Tokens held in the draft's KV cache (a prefix of the history plus unverified drafts).
    std::span<const token_id> cached() const { return session_->tokens(); }

  private:
    int sync(std::span<const token_id> history);
    void eval(std::span<const token_id> tokens);

    const Model& model_;
    DraftModelParams params_;
    std::unique_ptr<Session> session_;
    DraftChooser chooser_;
    std::vector<token_id> batch_;
    // The longest pass the draft session has run: a catch-up longer than this (after steps that
    // drafted nothing, --draft auto decoding plainly) goes in passes of this size, so the
    // session's buffers do not grow during a generation.
    int max_pass_ = 8;
    size_t n_history_ = 0;  // history length at the last propose()
    // The proposal in progress (start .. the empty span).
    Constraints* guide_now_ = nullptr;
    Constraints::Mark mark_;
    int n_vocab_now_ = 0, steps_ = 0, steps_left_ = 0;
    std::span<const token_id> end_proposal();
};

}  // namespace specula
