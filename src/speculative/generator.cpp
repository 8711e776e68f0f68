// Generator: see generator.h.
#include "speculative/generator.h"

#include <algorithm>
#include <utility>

namespace specula {

Generator::Generator(Session& target, Sampler& sampler, Drafter* drafter, const GenParams& params,
                     DraftLengthController* auto_length, Constraints* constraints)
    : engine_(target.model()) {
    seq_.target = &target;
    seq_.sampler = &sampler;
    seq_.drafter = drafter;
    seq_.constraints = constraints;
    seq_.auto_length = auto_length;
    seq_.params = params;
}

SpecStats Generator::generate(std::span<const token_id> prompt, const TokenCallback& on_token) {
    return run(prompt, 0, on_token);
}

SpecStats Generator::resume(std::span<const token_id> prompt, const TokenCallback& on_token) {
    // The target holds the previous history's first n_past() tokens.
    const std::vector<token_id>& h = seq_.history;
    const size_t lim = std::min({size_t(seq_.target->n_past()), h.size(), prompt.size()});
    size_t keep = 0;
    while (keep < lim && h[keep] == prompt[keep]) ++keep;
    return run(prompt, int(keep), on_token);
}

SpecStats Generator::run(std::span<const token_id> prompt, int n_keep,
                         const TokenCallback& on_token) {
    seq_.on_token = on_token;
    engine_.start(seq_, prompt, n_keep);
    Sequence* batch[] = {&seq_};
    while (!seq_.done()) engine_.step(batch);
    engine_.finish(seq_);
    return std::move(seq_.stats);  // the next start() begins new statistics
}

std::vector<token_id> generate_tokens(Session& target, Sampler& sampler, Drafter* drafter,
                                      std::span<const token_id> prompt, const GenParams& params,
                                      SpecStats* stats) {
    Generator gen(target, sampler, drafter, params);
    SpecStats st = gen.generate(prompt);
    if (stats) *stats = st;
    return gen.output();
}

}  // namespace specula
