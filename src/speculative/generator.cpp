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
    return run(prompt, /*reuse_cache=*/false, on_token);
}

SpecStats Generator::resume(std::span<const token_id> prompt, const TokenCallback& on_token) {
    return run(prompt, /*reuse_cache=*/true, on_token);
}

SpecStats Generator::run(std::span<const token_id> prompt, bool reuse_cache,
                         const TokenCallback& on_token) {
    seq_.on_token = on_token;
    engine_.start(seq_, prompt, reuse_cache);
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
