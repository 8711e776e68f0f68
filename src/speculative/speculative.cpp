// make_drafter / parse_draft_length: see speculative.h.
#include "speculative/speculative.h"

#include <charconv>

#include "common/error.h"
#include "speculative/draft_model_drafter.h"
#include "speculative/vocab_check.h"

namespace specula {

SpeculativeSetup make_drafter(const Model& target, const DraftOptions& opts,
                              const SamplingParams& sampling) {
    SpeculativeSetup s;
    if (!opts.draft_model.empty() && opts.lookup)
        fail("use either a draft model (-md) or n-gram lookup (--lookup), not both");
    if (opts.lookup) {
        s.drafter = std::make_unique<NgramDrafter>(opts.ngram);
    } else if (!opts.draft_model.empty()) {
        s.draft_model = Model::load(opts.draft_model);
        check_vocab_compatible(target.tokenizer(), s.draft_model->tokenizer(), "the target",
                               opts.draft_model);
        DraftModelParams dp;
        dp.n_ctx = opts.n_ctx;
        dp.n_threads = opts.n_threads;
        dp.p_min = opts.p_min;
        dp.sampling = sampling;
        s.drafter = std::make_unique<DraftModelDrafter>(*s.draft_model, dp);
    }
    return s;
}

void parse_draft_length(const std::string& value, GenParams& params) {
    if (value == "auto") {
        params.draft_auto = true;
        return;
    }
    int n = -1;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 0 || n > 64)
        fail("--draft: expected 'auto' or a length 0..64, got '", value, "'");
    params.draft_auto = false;
    params.n_draft = n;
}

}  // namespace specula
