// Generator: one generation at a time, as the engine's batch of one (speculative/engine.h). It
// owns an Engine over the target and one Sequence, starts the sequence and steps it until it
// stops: `specula run`, `chat` and `bench` generate through it, and the server steps its requests
// through the same Engine::step. Everything passed in must outlive the Generator; `constraints`,
// when given, must hold no history yet (the engine pushes the prompt and every emitted token).
#pragma once

#include <span>
#include <vector>

#include "speculative/engine.h"
#include "speculative/sequence.h"

namespace specula {

class Generator {
  public:
    // `drafter` may be null (plain decoding). `auto_length`, when given, chooses the draft length
    // of every step (--draft auto; params.n_draft is then unused) and learns from each step; the
    // caller owns it and may keep it across generations.
    Generator(Session& target, Sampler& sampler, Drafter* drafter, const GenParams& params,
              DraftLengthController* auto_length = nullptr, Constraints* constraints = nullptr);

    // Starts from an empty target cache, evaluates the prompt, then steps until generation stops.
    // Throws Error when the prompt is empty or does not fit the context.
    SpecStats generate(std::span<const token_id> prompt, const TokenCallback& on_token = {});

    // generate() that keeps the caches of the previous generate() / resume() (a conversation's
    // next turn): the target keeps the longest common prefix of `prompt` and the previous history
    // and evaluates only the rest, the drafter resumes (Drafter::resume) and the constraints
    // restart from `prompt` (a grammar from its start). SpecStats::n_prompt counts every prompt
    // token, n_prompt_cached the ones reused from the cache.
    SpecStats resume(std::span<const token_id> prompt, const TokenCallback& on_token = {});

    // Optional; set before generate().
    void observe_rows(RowObserver observer) { seq_.on_row = std::move(observer); }

    const std::vector<token_id>& output() const { return seq_.output; }    // generated tokens
    const std::vector<token_id>& history() const { return seq_.history; }  // prompt + output
    const Engine& engine() const { return engine_; }

  private:
    SpecStats run(std::span<const token_id> prompt, bool reuse_cache,
                  const TokenCallback& on_token);

    Engine engine_;
    Sequence seq_;
};

// Convenience: plain or speculative generation of a whole sequence, returning the generated ids.
std::vector<token_id> generate_tokens(Session& target, Sampler& sampler, Drafter* drafter,
                                      std::span<const token_id> prompt, const GenParams& params,
                                      SpecStats* stats = nullptr);

}  // namespace specula
