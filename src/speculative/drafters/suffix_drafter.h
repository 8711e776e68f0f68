// Suffix decoding (arXiv:2411.04975; vLLM's "suffix", ik_llama.cpp's --spec-type suffix): drafts
// without a model from two suffix trees (suffix_tree.h), the better-scoring draft of the two:
//   - the sequence's own tree over its prompt and accepted output, grown as it goes;
//   - the SuffixCache, one per `run` or server, over the outputs of recent requests (each added
//     when its generation ends, Drafter::end), so an agent loop that repeats a tool call or an
//     edit gets it drafted from the earlier request. It holds at most max_cached_requests outputs
//     and cache_bytes of tree; the oldest outputs are evicted first.
// Drafting costs a few tree walks, no model pass. With a model drafter given (--spec-type suffix
// -md DRAFT.gguf), a step whose suffix draft matched at least min_match history tokens uses it,
// and any other step asks the model (which catches up on the steps it skipped). Under --draft auto
// (Drafter::costs given, once a target pass is measured) the choice is by measured cost instead
// (speculative/draft_length/draft_source.h): the tree's draft, free, or the model's at its best
// length, whichever is expected to produce more tokens per millisecond from each one's own
// running acceptance and the model's measured draft passes, or no draft when a plain pass is
// expected to do better (it picks the length: Drafter::picks_length).
#pragma once

#include <deque>
#include <memory>
#include <mutex>

#include "speculative/draft_length/draft_source.h"
#include "speculative/drafters/drafter.h"
#include "speculative/drafters/suffix_params.h"
#include "speculative/drafters/suffix_tree.h"

namespace specula {

class SuffixCache {
  public:
    explicit SuffixCache(const SuffixParams& params);  // check_suffix_params; Error naming a flag

    // Adds one request's output, evicting the oldest while the tree would pass the bounds (an
    // output too long for the memory bound alone keeps its last part).
    void add_output(std::span<const token_id> output);
    SuffixMatch match(std::span<const token_id> history, int n_max,
                      const SuffixLimits& limits) const;

    size_t bytes() const;
    int n_outputs() const;

  private:
    SuffixParams params_;
    mutable std::mutex mu_;  // a server's slots draft and end from its one scheduler thread, but
                             // several drafters share the cache
    SuffixTree tree_;
    std::deque<std::vector<token_id>> outputs_;
};

class SuffixDrafter final : public Drafter {
  public:
    // `cache` may be null (the sequence's own tree only); `model`, when given, drafts the steps
    // where the suffix trees match fewer than min_match tokens.
    SuffixDrafter(const SuffixParams& params, std::shared_ptr<SuffixCache> cache,
                  std::unique_ptr<Drafter> model = nullptr);

    const char* name() const override { return model_ ? "suffix+draft-model" : "suffix"; }
    void attach(Session* target) override;
    void begin(std::span<const token_id> prompt) override;
    void resume(std::span<const token_id> prompt) override;
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override;
    std::span<const token_id> next(Draft& out) override;
    Session* session() override { return model_ ? model_->session() : nullptr; }
    int steps() const override { return by_model_ ? model_->steps() : 0; }
    void accept(int n_kept) override;
    void observe(const StepRecord& step) override;
    bool picks_length() const override { return model_ && costs_; }
    void end(std::span<const token_id> history, int n_prompt) override;

    // The last proposal came from the model drafter (false: from a suffix tree, or none).
    bool last_by_model() const { return by_model_; }
    // The choices by cost so far (--draft auto with a model; kept across generations).
    const DraftSourceChooser& chooser() const { return chooser_; }

  private:
    void restart();
    std::span<const token_id> ask_model(std::span<const token_id> history, int n, Draft& out);

    SuffixParams params_;
    SuffixLimits limits_;
    std::shared_ptr<SuffixCache> cache_;
    std::unique_ptr<Drafter> model_;
    SuffixTree own_;
    SuffixTree::Appender appender_;
    size_t fed_ = 0;  // history tokens in own_
    bool by_model_ = false;
    DraftSourceChooser chooser_;
    DraftSource source_ = DraftSource::none;  // the last proposal's, when chosen by cost
};

}  // namespace specula
