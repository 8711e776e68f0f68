// RequestSampling: see sampling_setup.h.
#include "server/protocol/sampling_setup.h"

#include <string>

#include "common/error.h"
#include "server/protocol/api_error.h"

namespace specula {

void RequestSampling::check(CompletionRequest& req) const {
    const int nv = target_.hparams().n_vocab;
    try {
        if (!req.logit_bias_json.is_null())
            parse_logit_bias_json(req.logit_bias_json, nv, req.penalties.logit_bias);
        validate(req.penalties, nv);
    } catch (const Error& e) {
        // The messages of parse_logit_bias_json() and validate() start with the field's name.
        const std::string msg = e.what();
        std::string param = "logit_bias";
        for (const char* f : {"repeat_penalty", "repeat_last_n", "presence_penalty",
                              "frequency_penalty", "dry_multiplier", "dry_base",
                              "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers"})
            if (msg.rfind(f, 0) == 0) param = f;
        bad_request(msg, param);
    }
}

SamplingParams RequestSampling::sampling(const CompletionRequest& r, int choice) const {
    uint64_t seed = r.seed;
    if (seed != 0xFFFFFFFFu) seed += uint64_t(choice);
    return SamplingParams{r.temperature, r.top_k,       r.top_p,           r.min_p,        seed,
                          r.typical_p,   r.top_n_sigma, r.xtc_probability, r.xtc_threshold};
}

std::unique_ptr<Constraints> RequestSampling::constraints(const CompletionRequest& r) const {
    if (!r.penalties.active() && !r.grammar) return nullptr;
    const int nv = target_.hparams().n_vocab;
    return std::make_unique<Constraints>(r.penalties, nv, r.grammar, r.grammar ? vocab() : nullptr,
                                         breakers(r.penalties.dry));
}

std::shared_ptr<const DryBreakers> RequestSampling::breakers(const DryParams& dry) const {
    if (!dry.on()) return nullptr;
    std::lock_guard lock(mu_);
    for (const auto& [list, table] : breakers_)
        if (list == dry.sequence_breakers) return table;
    // Each list costs a pass over the vocabulary; the last few are kept (clients send one).
    constexpr size_t kKept = 8;
    if (breakers_.size() == kKept) breakers_.erase(breakers_.begin());
    breakers_.emplace_back(dry.sequence_breakers,
                           DryBreakers::from_tokenizer(dry.sequence_breakers, target_.tokenizer()));
    return breakers_.back().second;
}

std::shared_ptr<const GrammarVocab> RequestSampling::vocab() const {
    std::lock_guard lock(mu_);
    if (!vocab_) vocab_ = GrammarVocab::from_tokenizer(target_.tokenizer());
    return vocab_;
}

}  // namespace specula
