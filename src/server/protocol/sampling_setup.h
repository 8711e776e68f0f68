// RequestSampling: the one place where a request's sampling fields become the Sampler's
// parameters and the Constraints (sampling/constraints.h) the Generator applies to every target
// row: logit_bias, presence / frequency / repetition penalties, DRY and the response_format
// grammar. The grammar's token table (GrammarVocab) is built once per model, on the first request
// that asks for structured output, and shared by every later one; DRY's breaker tables once per
// breaker list (the last 8 lists kept).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "model/load/model.h"
#include "sampling/constraints.h"
#include "sampling/sampler.h"
#include "server/protocol/request.h"

namespace specula {

class RequestSampling {
  public:
    explicit RequestSampling(const Model& target) : target_(target) {}

    // Parses logit_bias_json into req.penalties.logit_bias and validates the penalties against
    // the vocabulary: ApiError 400 naming the field.
    void check(CompletionRequest& req) const;

    // Choice `choice` of n: a given seed advances by the choice's index, so choices differ.
    SamplingParams sampling(const CompletionRequest& req, int choice = 0) const;

    // nullptr when the request constrains nothing.
    std::unique_ptr<Constraints> constraints(const CompletionRequest& req) const;

  private:
    std::shared_ptr<const GrammarVocab> vocab() const;
    // DRY's breakers as tokens (null with DRY off), built once per breaker list.
    std::shared_ptr<const DryBreakers> breakers(const DryParams& dry) const;

    const Model& target_;
    mutable std::mutex mu_;
    mutable std::shared_ptr<const GrammarVocab> vocab_;
    mutable std::vector<std::pair<std::vector<std::string>, std::shared_ptr<const DryBreakers>>>
        breakers_;
};

}  // namespace specula
