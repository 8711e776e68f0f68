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
        for (const char* f :
             {"repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty"})
            if (msg.rfind(f, 0) == 0) param = f;
        bad_request(msg, param);
    }
}

SamplingParams RequestSampling::sampling(const CompletionRequest& r, int choice) const {
    uint64_t seed = r.seed;
    if (seed != 0xFFFFFFFFu) seed += uint64_t(choice);
    return SamplingParams{r.temperature, r.top_k,     r.top_p,      r.min_p,
                          seed,          r.typical_p, r.top_n_sigma};
}

std::unique_ptr<Constraints> RequestSampling::constraints(const CompletionRequest& r) const {
    if (!r.penalties.active() && !r.grammar) return nullptr;
    const int nv = target_.hparams().n_vocab;
    if (!r.grammar) return std::make_unique<Constraints>(r.penalties, nv);
    return std::make_unique<Constraints>(r.penalties, nv, r.grammar, vocab());
}

std::shared_ptr<const GrammarVocab> RequestSampling::vocab() const {
    std::lock_guard lock(mu_);
    if (!vocab_) vocab_ = GrammarVocab::from_tokenizer(target_.tokenizer());
    return vocab_;
}

}  // namespace specula
