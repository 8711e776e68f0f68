// `specula run`: llama-cli style generation. The prompt is tokenized with BOS as the vocabulary
// says and special tokens parsed, evaluated in passes of
// SessionParams::n_ubatch tokens keeping only the last row's logits, and the sampled tokens' pieces
// stream to stdout byte for byte (nothing else goes there). Options are checked and the context
// budget is enforced before any token is generated; logs and the closing statistics line go to
// stderr. With a drafter (-md DRAFT or --spec-type ngram) the same loop decodes speculatively
// (speculative/generator.h); the text is the same, only faster, and the acceptance statistics
// follow. With -cnv it is a conversation instead (cli/cmd_chat.cpp).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "cli/speculative_options.h"
#include "common/error.h"
#include "common/stop_signals.h"
#include "speculative/config.h"
#include "speculative/draft_trace.h"
#include "tokenizer/prompt.h"

namespace specula::cli {

namespace {

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
    if (opt.conversation) return cmd_chat(opt);
    check_run_options(opt);
    if (!opt.system_prompt.empty())
        fail("-sys (--system-prompt) needs conversation mode: add -cnv, or use `specula chat`");
    if (!opt.chat_template.empty())
        fail("--chat-template needs conversation mode: add -cnv, or use `specula chat`");
    if (!opt.chat_template_file.empty())
        fail("--chat-template-file needs conversation mode: add -cnv, or use `specula chat`");
    const std::string text = prompt_text(opt);
    reverse_prompts(opt);  // an empty -r fails before the model loads
    // The speculative flags, parsed once: a bad one fails before the model loads.
    const SpeculativeConfig spec = parse_speculative_cli(opt.spec, "run");

    std::vector<token_id> prompt;
    const auto setup = open_run(opt, spec, [&](const Runtime& rt) {
        // Refuses a prompt that cannot fit in the context before any cache is allocated (one
        // too long by its bytes alone before it is tokenized); a budget past the context stops
        // at a full context, as llama-cli does.
        const Tokenizer& tok = rt.target->tokenizer();
        const ContextFit bytes_fit = check_prompt_bytes(tok, text.size(), rt.n_ctx, " (-c)");
        if (bytes_fit.what != ContextFit::fits) fail(bytes_fit.message);
        prompt = tokenize_prompt(tok, text);
        const ContextFit fit =
            check_context(int(prompt.size()), opt.n_predict, rt.n_ctx, " (-c)", "-n");
        if (fit.what == ContextFit::prompt_too_long) fail(fit.message);
        if (fit.what == ContextFit::budget_too_long)
            log("note: %s; generation stops when the context is full", fit.message.c_str());
    });
    const Tokenizer& tok = setup->rt.target->tokenizer();
    const bool bos_only = prompt.size() == 1 && prompt[0] == tok.bos();
    PieceWriter writer(tok, tok.model() == "llama" && bos_only, opt);
    setup->gen.trace = !spec.draft_trace.empty();
    Generator gen = setup->make_generator();
    const SpecStats st = gen.generate(prompt, [&](token_id id, bool) { return writer(id); });
    // A terminal gets the text's line ended; piped stdout stays exactly the generated bytes.
    if (isatty(STDOUT_FILENO)) std::fputs("\n", stdout);
    std::fflush(stdout);
    print_stats(st, static_cast<int>(prompt.size()), setup->rt.load_ms);
    if (setup->rt.drafter && log_enabled()) advise(st, st.plain_pass_ms);
    if (!opt.stats_json.empty()) write_stats_json(opt.stats_json, st);
    if (!spec.draft_trace.empty()) write_draft_trace(spec.draft_trace, st.trace, st.drafter);
    return 0;
}

}  // namespace specula::cli
