// Plain autoregressive decoding for `specula run` (see generate.h).
#include "cli/generate.h"

#include "cli/cli_util.h"

namespace specula::cli {

GenerateStats generate_plain(Session& session, Sampler& sampler,
                             const std::vector<token_id>& prompt, const GenerateLimits& limits,
                             const TokenSink& sink) {
    const Tokenizer& tok = session.model().tokenizer();
    const int n_vocab = session.model().hparams().n_vocab;
    GenerateStats st;
    st.n_prompt = static_cast<int>(prompt.size());

    Timer prompt_timer;
    session.eval(prompt);
    st.prompt_ms = prompt_timer.ms();

    Timer gen_timer;
    while (limits.n_predict < 0 || st.n_generated < limits.n_predict) {
        const float* logits = session.logits(session.n_logits() - 1);
        const token_id id = sampler.sample(logits, n_vocab);
        if (tok.is_eog(id) && !limits.ignore_eos) {
            st.hit_eog = true;
            break;
        }
        sink(id);
        ++st.n_generated;
        if (st.n_generated == limits.n_predict) break;
        if (session.n_past() >= session.n_ctx()) {
            st.context_full = true;
            break;
        }
        const token_id next[1] = {id};
        session.eval(next);
    }
    st.gen_ms = gen_timer.ms();
    return st;
}

}  // namespace specula::cli
