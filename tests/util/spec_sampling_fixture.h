// What the two speculative sampling tests (test_speculative_sampling,
// test_sampling_spec_constraints) share: stories260K as the target and llama2xs as the draft
// (they disagree a lot), the prompt after which they disagree, one-thread sessions, the number of
// trials and the draft length, and the sampling transforms (temperature 1, top-k 40, top-p 0.95,
// the test's min-p) with a seed.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "model/session.h"
#include "sampling/sampler.h"
#include "test_util.h"

namespace specula::test {

inline const SessionParams kOneThread{0, 1};
constexpr int kTrials = 2000;  // (t1, t2) pairs drawn per chi-square test
constexpr int kDraft = 3;      // tokens per draft

using TokenPair = std::pair<token_id, token_id>;

inline SamplingParams spec_sampling(float min_p, uint64_t seed) {
    SamplingParams p;
    p.temp = 1.0f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = min_p;
    p.seed = seed;
    return p;
}

struct SpecModels {
    std::unique_ptr<Model> target, draft;
    std::vector<token_id> prompt;
    SpecModels() {
        target = Model::load(shared_path("models/tinystories/stories260K.gguf"));
        draft = Model::load(shared_path("models/tinystories/llama2xs.gguf"));
        // "Tom and his dog went to the park. They saw a": the models disagree on what follows.
        prompt =
            target->tokenizer().encode("Tom and his dog went to the park. They saw a", true, false);
    }
};

}  // namespace specula::test
