// `specula run`: llama-cli style generation. The prompt is tokenized with BOS as the vocabulary
// says and special tokens parsed, evaluated in one batch, and the sampled tokens' pieces stream to
// stdout byte for byte (nothing else goes there). Options are checked and the context budget is
// enforced before any token is generated; logs and the closing statistics line go to stderr.
// With a drafter (-md DRAFT or --spec-type ngram) the same loop decodes speculatively
// (speculative/generator.h); the text is the same, only faster, and the acceptance statistics
// follow.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/stop_signals.h"
#include "frontend/prompt.h"
#include "kernels/threadpool.h"
#include "model/model.h"
#include "sampling/constraints.h"
#include "sampling/sampler.h"
#include "speculative/config.h"
#include "speculative/generator.h"
#include "speculative/make_drafter.h"

namespace specula::cli {

namespace {

void check_options(const RunOptions& o) {
    if (o.n_predict < -1) fail("-n (--n-predict) must be -1 or >= 0, got ", o.n_predict);
    if (o.n_threads < 0) fail("-t (--threads) must be >= 1, got ", o.n_threads);
    if (o.n_threads > max_pool_threads())
        fail("-t (--threads) must be at most ", max_pool_threads(),
             " (4x the hardware threads), got ", o.n_threads);
    if (o.n_ctx < 0) fail("-c (--ctx-size) must be >= 0, got ", o.n_ctx);
    // Written so that NaN fails too.
    if (!std::isfinite(o.temp)) fail("--temp must be a finite number, got ", o.temp);
    if (!(o.top_p >= 0.f && o.top_p <= 1.f)) fail("--top-p must be in [0, 1], got ", o.top_p);
    if (!(o.min_p >= 0.f && o.min_p <= 1.f)) fail("--min-p must be in [0, 1], got ", o.min_p);
}

// Writes token pieces to stdout as they come. llama2.c drops the space that SentencePiece puts
// in front of the first word when generation starts from BOS alone; so do we, for that case only.
class PieceWriter {
  public:
    PieceWriter(const Tokenizer& tok, bool strip_first_space)
        : tok_(tok), strip_first_space_(strip_first_space) {}

    void operator()(token_id id) {
        std::string piece = tok_.token_to_piece(id, /*special=*/false);
        if (first_ && strip_first_space_ && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
        first_ = false;
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
    }

  private:
    const Tokenizer& tok_;
    bool strip_first_space_;
    bool first_ = true;
};

// The KV cache is allocated up front; a context too large for memory is a user error.
std::unique_ptr<Session> make_session(const Model& model, int n_ctx, int n_threads) {
    try {
        return std::make_unique<Session>(model, SessionParams{n_ctx, n_threads});
    } catch (const std::bad_alloc&) {
        fail("out of memory allocating the KV cache for a context of ", n_ctx,
             " tokens (-c); try a smaller -c");
    }
}

// The penalties and logit bias of -repeat-penalty ... --logit-bias; Error names a bad value.
Constraints make_constraints(const RunOptions& o, int n_vocab) {
    PenaltyParams p = o.penalties;
    for (const std::string& b : o.logit_bias) parse_logit_bias(b, p.logit_bias);
    try {
        return Constraints(p, n_vocab);
    } catch (const Error& e) {
        // The field names are the server's (repeat_penalty); say the flag as the user typed it.
        std::string msg = e.what();
        for (size_t i = 0; i < msg.size(); ++i)
            if (msg[i] == '_') msg[i] = '-';
        fail("--", msg);
    }
}

// What one plain decoding step costs: the fastest of three one-token target passes at the end
// of the context used (the cache is left as it was); 0 when there is no room for one.
double plain_pass_ms(Session& target, token_id last) {
    const int n_past = target.n_past();
    if (n_past >= target.n_ctx()) return 0;
    double best = 0;
    for (int i = 0; i < 3; ++i) {
        Timer t;
        target.eval(std::span(&last, 1));
        const double ms = t.ms();
        target.rollback(n_past);
        best = i == 0 ? ms : std::min(best, ms);
    }
    return best;
}

// One line when a speculative run spent more per token than plain decoding would have.
void advise(const SpecStats& st, double plain_ms) {
    if (st.n_drafts == 0 || st.n_generated < 16 || plain_ms <= 0) return;
    const double spec_ms = st.t_gen_ms / st.n_generated;
    if (spec_ms <= plain_ms) return;
    // A draft step that costs half a target pass or more cannot pay for itself at any length.
    const char* hint = st.cost_ratio() >= 0.5 ? "use a much smaller draft model, or plain decoding"
                                              : "try --draft auto or a smaller --draft N";
    log("note: speculation was slower than plain decoding here (%.3f ms per token, a plain step "
        "takes %.3f ms; acceptance %.0f%%, draft/target cost ratio %.2f): %s",
        spec_ms, plain_ms, 100 * st.accept_rate(), st.cost_ratio(), hint);
}

void print_stats(const SpecStats& st, int n_prompt, double load_ms) {
    if (st.stop_reason == "context") log("warning: the context is full; generation stopped");
    if (st.n_generated > 0) log("%s", "");  // end the streamed text's line on a terminal
    // The prompt pass covers all prompt tokens but the last (it rides with the first step).
    log("prompt: %d tokens, %.1f tok/s | generated: %d tokens, %.1f tok/s | load: %.0f ms",
        n_prompt, st.prompt_tps(), st.n_generated, st.gen_tps(), load_ms);
    if (log_enabled()) st.print_speculative(stderr);
}

void write_stats_json(const std::string& path, const SpecStats& st) {
    std::ofstream f(path);
    if (!f) fail("cannot write --stats-json file ", path);
    f << st.to_json().dump(2) << "\n";
    if (!f) fail("error writing --stats-json file ", path);
}

}  // namespace

int cmd_run(const RunOptions& opt) {
    exit_on_stop_signals("run", "");  // also while loading (common/stop_signals.h)
    check_options(opt);
    const std::string prompt_text = resolve_prompt(opt.prompt, opt.prompt_file);
    const SpeculativeConfig spec = parse_speculative_flags(opt.spec);

    Timer load_timer;
    auto model = Model::load(opt.model);
    const double load_ms = load_timer.ms();
    const Tokenizer& tok = model->tokenizer();
    Constraints constraints = make_constraints(opt, model->hparams().n_vocab);

    const int n_ctx_train = model->hparams().n_ctx_train;
    const int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : n_ctx_train;
    if (opt.n_ctx > n_ctx_train && n_ctx_train > 0) {
        log("warning: -c %d is larger than the model's training context (%d)", opt.n_ctx,
            n_ctx_train);
    }
    // A prompt too long by its bytes alone is refused before it is tokenized.
    const ContextFit bytes_fit = check_prompt_bytes(tok, prompt_text.size(), n_ctx, " (-c)");
    if (bytes_fit.what != ContextFit::fits) fail(bytes_fit.message);
    const auto prompt = tokenize_prompt(tok, prompt_text);
    // Refuses a prompt that cannot fit in the context before anything runs; a budget past the
    // context stops at a full context, as llama-cli does.
    const ContextFit fit = check_context(int(prompt.size()), opt.n_predict, n_ctx, " (-c)", "-n");
    if (fit.what == ContextFit::prompt_too_long) fail(fit.message);
    if (fit.what == ContextFit::budget_too_long)
        log("note: %s; generation stops when the context is full", fit.message.c_str());

    const int n_threads = default_threads(opt.n_threads);
    auto session = make_session(*model, n_ctx, n_threads);
    Sampler sampler(SamplingParams{opt.temp, opt.top_k, opt.top_p, opt.min_p, opt.seed});
    log("model: %s | n_ctx: %d | threads: %d | seed: %llu", model->describe().c_str(), n_ctx,
        n_threads, static_cast<unsigned long long>(sampler.seed()));

    const SamplingParams sparams = sampler.params();
    const SpeculativeSetup setup = load_speculative(spec, *model);
    // The draft follows the target through the whole context.
    const auto drafter = make_drafter(setup, DrafterParams{n_ctx, n_threads, sparams});
    GenParams gp;
    gp.n_predict = opt.n_predict;
    gp.ignore_eos = opt.ignore_eos;
    gp.n_draft = spec.n_draft;
    gp.draft_min = spec.draft_min;
    if (drafter) {
        log("speculative: %s, draft %s", drafter->name(), draft_length_name(spec).c_str());
    }

    const bool bos_only = prompt.size() == 1 && prompt[0] == tok.bos();
    PieceWriter writer(tok, tok.model() == "llama" && bos_only);
    DraftLengthController auto_length;  // --draft auto
    Generator gen(*session, sampler, drafter.get(), gp, spec.draft_auto ? &auto_length : nullptr,
                  &constraints);
    const SpecStats st = gen.generate(prompt, [&](token_id id, bool) {
        writer(id);
        return true;
    });
    print_stats(st, static_cast<int>(prompt.size()), load_ms);
    if (drafter && log_enabled()) advise(st, plain_pass_ms(*session, gen.history().back()));
    if (!opt.stats_json.empty()) write_stats_json(opt.stats_json, st);
    return 0;
}

}  // namespace specula::cli
