// `specula chat` and `specula run -cnv`: llama-cli's conversation mode. The conversation is a
// list of messages formatted by the model's chat template, rendered by the Jinja engine
// (chat/chat_prompt.h; --chat-template-file gives another, --chat-template NAME a built-in
// format, and a model without a template uses the plain "User: ... Assistant:" format, said once
// on stderr). -sys is the system message, -p / -f the
// first user message; after that each line typed is one user turn (a line ending in `\` continues
// on the next). Each reply streams to stdout.
//
// The KV caches are kept across turns: the cache holds the previous prompt and the reply as
// generated; a new turn appends the template's close of that reply (its end-of-turn marker) and
// the new user turn with the opening of the next reply, and only those tokens are evaluated, in
// the target and in the draft model (Generator::resume), as llama-cli does. A template that
// rewrote earlier turns would get the whole text tokenized again, the cache kept up to the first
// differing token.
//
// `/exit` or end of input (Ctrl-D) at the prompt ends the conversation. Ctrl-C during a reply stops
// the reply and returns to the prompt; at the prompt it exits (status 130), as in llama-cli.
// Each turn ends with one stats line on stderr: the new prompt tokens and the cached ones, prompt
// and reply tok/s, and with a drafter the acceptance.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_prompt.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "cli/speculative_options.h"
#include "common/error.h"
#include "server/serving/service.h"
#include "tokenizer/prompt.h"

namespace specula::cli {

namespace {

volatile std::sig_atomic_t g_replying = 0;     // a reply is being generated
volatile std::sig_atomic_t g_interrupted = 0;  // Ctrl-C during that reply

void on_sigint(int) {
    if (g_replying) {
        g_interrupted = 1;
        return;
    }
    const char nl = '\n';
    (void)!write(STDOUT_FILENO, &nl, 1);
    _exit(130);
}

void install_sigint() {
    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
}

ChatPrompter choose_prompter(const RunOptions& o, const Model& model) {
    if (!o.chat_template.empty()) {
        const ChatFormat f = parse_chat_format(o.chat_template);
        log("chat template: %s (--chat-template)", chat_format_name(f));
        return ChatPrompter::builtin(f, "--chat-template");
    }
    const std::string tmpl = model.file().get_string_or("tokenizer.chat_template", "");
    ChatPrompter p = choose_chat_prompter(tmpl, o.chat_template_file, model.tokenizer(), "chat");
    if (p.is_jinja() || p.format() != ChatFormat::Plain)
        log("chat template: %s", p.describe().c_str());
    else
        log("chat template: plain \"User: ... Assistant:\" (%s; --chat-template NAME picks one)",
            tmpl.empty() ? "the model has no tokenizer.chat_template"
                         : "the model's template is not one specula recognises");
    return p;
}

// One user turn from stdin: a line, continued while it ends in a backslash. False at end of input.
bool read_turn(std::string& out) {
    out.clear();
    std::string line;
    while (std::getline(std::cin, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line.back() != '\\') {
            out += line;
            return true;
        }
        line.pop_back();
        out += line + "\n";
    }
    return !out.empty();
}

void print_turn_stats(const SpecStats& st) {
    std::string spec;
    if (st.n_drafts > 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, " | accepted %ld/%ld drafted (%.0f%%), %.2f tokens/pass",
                      st.n_accepted, st.n_drafted, 100 * st.accept_rate(), st.mean_accept_len());
        spec = buf;
    }
    log("[prompt: %d new tokens (%d cached), %.1f tok/s | reply: %d tokens, %.1f tok/s%s]",
        st.n_prompt - st.n_prompt_cached, st.n_prompt_cached, st.prompt_tps(), st.n_generated,
        st.gen_tps(), spec.c_str());
}

// The conversation so far, and the text the generator's history holds of it.
class Conversation {
  public:
    Conversation(const Tokenizer& tok, ChatPrompter prompter, const std::string& system)
        : tok_(tok), prompter_(std::move(prompter)) {
        if (!system.empty()) add("system", system);
    }

    // The tokens of the conversation up to the assistant's next reply, after `user`'s message.
    // `held` is the generator's history (the previous prompt and the reply as generated). When
    // the new prompt's text is the previous prompt, (whitespace and) the reply, then more, only
    // that more is tokenized and appended to `held` (the template only appended to what it
    // rendered; this holds whether or not it honours add_generation_prompt).
    std::vector<token_id> next_prompt(const std::string& user, const std::vector<token_id>& held) {
        const std::string previous = prompt_text_;
        const std::string reply =
            messages_.empty() ? "" : messages_.back().value("content", std::string());
        add("user", user);
        prompt_text_ = prompter_.render(messages_, /*add_generation_prompt=*/true);
        if (held.empty() || previous.empty() || !prompt_text_.starts_with(previous))
            return tokenize_prompt(tok_, prompt_text_);
        const size_t at = prompt_text_.find(reply, previous.size());
        if (at == std::string::npos || prompt_text_.find_first_not_of(" \t\r\n", previous.size()) <
                                           std::min(at, prompt_text_.size()))
            return tokenize_prompt(tok_, prompt_text_);
        const std::string delta = prompt_text_.substr(at + reply.size());
        std::vector<token_id> ids = held;
        const auto more = tok_.encode(delta, /*add_special=*/false, /*parse_special=*/true);
        ids.insert(ids.end(), more.begin(), more.end());
        return ids;
    }

    // The reply as generated; the templates see it without surrounding whitespace.
    void add_reply(const std::string& reply) { add("assistant", trim(reply)); }

    // Forgets the oldest user message and the reply to it (the system message and the latest
    // user message stay); false when there is nothing older to forget. The next prompt is
    // rendered whole: the cache keeps what still matches (the system prompt), as llama-cli keeps
    // its first --keep tokens when it shifts the context.
    bool drop_oldest_exchange() {
        size_t first = 0;
        while (first < messages_.size() && messages_[first]["role"] != "user") ++first;
        size_t n_user = 0;
        for (const auto& m : messages_) n_user += m["role"] == "user";
        if (n_user < 2) return false;
        size_t end = first + 1;
        while (end < messages_.size() && messages_[end]["role"] != "user") ++end;
        messages_.erase(messages_.begin() + long(first), messages_.begin() + long(end));
        return true;
    }

    // The prompt for the messages as they are now (after drop_oldest_exchange), rendered whole.
    std::vector<token_id> render_whole() {
        prompt_text_ = prompter_.render(messages_, /*add_generation_prompt=*/true);
        return tokenize_prompt(tok_, prompt_text_);
    }

    // The prompt of the system message(s) and the latest user message alone: the least any
    // forgetting can leave.
    std::vector<token_id> render_least() const {
        nlohmann::ordered_json least = nlohmann::ordered_json::array();
        for (const auto& m : messages_)
            if (m["role"] == "system") least.push_back(m);
        if (!messages_.empty()) least.push_back(messages_.back());
        return tokenize_prompt(tok_, prompter_.render(least, /*add_generation_prompt=*/true));
    }

    // Takes back the latest user message (it did not fit); the next prompt is rendered whole.
    void drop_last_user() {
        if (!messages_.empty() && messages_.back()["role"] == "user")
            messages_.erase(messages_.end() - 1);
        prompt_text_.clear();
    }

  private:
    void add(const char* role, const std::string& content) {
        messages_.push_back({{"role", role}, {"content", content}});
    }

    static std::string trim(const std::string& s) {
        const char* ws = " \t\n\r";
        const size_t b = s.find_first_not_of(ws);
        return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(ws) - b + 1);
    }

    const Tokenizer& tok_;
    ChatPrompter prompter_;
    nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
    std::string prompt_text_;  // the last next_prompt()'s text
};

}  // namespace

int cmd_chat(const RunOptions& opt) {
    check_run_options(opt);
    const std::string first =
        opt.prompt.empty() && opt.prompt_file.empty() ? std::string() : prompt_text(opt);
    reverse_prompts(opt);  // an empty -r fails before the model loads
    const SpeculativeConfig spec = parse_speculative_cli(opt.spec, "chat");  // parsed once
    if (!opt.chat_template.empty() && !opt.chat_template_file.empty())
        fail("give --chat-template or --chat-template-file, not both");
    if (!opt.chat_template_file.empty())  // a bad file fails before the model loads
        (void)load_chat_template_file(opt.chat_template_file, {});
    std::optional<ChatPrompter> prompter;  // chosen (and logged) before any cache
    const auto setup = open_run(
        opt, spec, [&](const Runtime& rt) { prompter.emplace(choose_prompter(opt, *rt.target)); });
    const Tokenizer& tok = setup->rt.target->tokenizer();
    const int n_ctx = setup->rt.n_ctx;
    Conversation conv(tok, std::move(*prompter), opt.system_prompt);
    Generator gen = setup->make_generator();
    log("conversation mode: type a message and Enter; a line ending in \\ continues; /exit or "
        "Ctrl-D ends; Ctrl-C stops a reply");
    install_sigint();
    const bool interactive = isatty(STDIN_FILENO);  // else the input is echoed after "> "

    std::string user = first;
    bool have_turn = !first.empty();
    for (;;) {
        if (!have_turn) {
            std::fputs("\n> ", stdout);
            std::fflush(stdout);
            if (!read_turn(user)) {  // Ctrl-D
                std::fputs("\n", stdout);
                break;
            }
            if (!interactive) std::printf("%s\n", user.c_str());  // a transcript, as typed
            if (user == "/exit") break;
            if (opt.escape) user = process_escapes(user);  // as llama-cli does with typed lines
            if (user.empty()) continue;
        }
        have_turn = false;
        std::vector<token_id> prompt = conv.next_prompt(user, gen.history());
        // A full context forgets the oldest exchanges, keeping room for a reply (-n, at most
        // half the context; else a quarter), as llama-cli shifts its context instead of ending.
        const int room = opt.n_predict >= 0 ? std::min(opt.n_predict, n_ctx / 2) : n_ctx / 4;
        // A message that does not fit is refused, and taken back: true when `size` is too long.
        const auto refused = [&](size_t size) {
            const ContextFit fit = check_context(int(size) + 1, -1, n_ctx, " (-c)", "-n");
            if (fit.what != ContextFit::prompt_too_long) return false;
            log("error: this message does not fit: %s; send a shorter one, or start again with a "
                "larger -c",
                fit.message.c_str());
            conv.drop_last_user();
            return true;
        };
        // One that cannot fit even alone is refused before any history is forgotten.
        if (int(prompt.size()) + 1 > n_ctx && refused(conv.render_least().size())) continue;
        int dropped = 0;
        while (int(prompt.size()) + room > n_ctx && conv.drop_oldest_exchange()) {
            prompt = conv.render_whole();
            ++dropped;
        }
        if (dropped > 0)
            log("context: the conversation reached the context (-c %d); forgot its %d oldest "
                "exchange%s to go on",
                n_ctx, dropped, dropped == 1 ? "" : "s");
        if (refused(prompt.size())) continue;

        PieceWriter writer(tok, /*strip_first_space=*/false, opt);
        g_interrupted = 0;
        g_replying = 1;
        const auto on_token = [&](token_id id, bool) { return writer(id) && !g_interrupted; };
        const SpecStats st =
            gen.history().empty() ? gen.generate(prompt, on_token) : gen.resume(prompt, on_token);
        g_replying = 0;
        std::fputs("\n", stdout);
        std::fflush(stdout);
        conv.add_reply(writer.text());
        if (g_interrupted) log("(reply stopped by Ctrl-C)");
        print_turn_stats(st);
        if (st.stop_reason == "context")
            log("warning: the context (-c %d) is full: the reply stops here; the next message "
                "forgets the oldest exchanges",
                n_ctx);
    }
    std::fflush(stdout);
    return 0;
}

}  // namespace specula::cli
