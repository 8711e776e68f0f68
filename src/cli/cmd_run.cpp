// `specula run`: llama-cli style generation. The prompt is tokenized with BOS as the vocabulary
// says and special tokens parsed, evaluated in one batch, and the sampled tokens' pieces stream to
// stdout byte for byte (nothing else goes there). Options are checked and the context budget is
// enforced before any token is generated; logs and the closing statistics line go to stderr.
// With a drafter (-md DRAFT or --spec-type ngram) the same loop decodes speculatively
// (speculative/generator.h); the text is the same, only faster, and the acceptance statistics
// follow. With -cnv it is a conversation instead (cli/cmd_chat.cpp).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "common/error.h"
#include "frontend/prompt.h"
#include "speculative/config.h"

namespace specula::cli {

namespace {

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
    if (opt.conversation) return cmd_chat(opt);
    check_run_options(opt);
    if (!opt.system_prompt.empty())
        fail("-sys (--system-prompt) needs conversation mode: add -cnv, or use `specula chat`");
    if (!opt.chat_template.empty())
        fail("--chat-template needs conversation mode: add -cnv, or use `specula chat`");
    const std::string prompt_text = resolve_prompt(opt.prompt, opt.prompt_file);
    parse_speculative_flags(opt.spec);  // a bad speculative flag fails before the model loads

    const LoadedTarget target = load_target(opt);
    const Tokenizer& tok = target.model->tokenizer();
    const auto prompt = tokenize_prompt(tok, prompt_text);
    // Refuses a prompt that cannot fit in the context before anything runs; a budget past the
    // context stops at a full context, as llama-cli does.
    const ContextFit fit =
        check_context(int(prompt.size()), opt.n_predict, target.n_ctx, " (-c)", "-n");
    if (fit.what == ContextFit::prompt_too_long) fail(fit.message);
    if (fit.what == ContextFit::budget_too_long)
        log("note: %s; generation stops when the context is full", fit.message.c_str());

    const auto engine = make_engine(opt, target);
    const bool bos_only = prompt.size() == 1 && prompt[0] == tok.bos();
    PieceWriter writer(tok, tok.model() == "llama" && bos_only);
    Generator gen = engine->make_generator();
    const SpecStats st = gen.generate(prompt, [&](token_id id, bool) {
        writer(id);
        return true;
    });
    print_stats(st, static_cast<int>(prompt.size()), target.load_ms);
    if (engine->drafter && log_enabled())
        advise(st, plain_pass_ms(*engine->session, gen.history().back()));
    if (!opt.stats_json.empty()) write_stats_json(opt.stats_json, st);
    return 0;
}

}  // namespace specula::cli
