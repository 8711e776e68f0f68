// Service: see service.h.
#include "server/serving/service.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "chat/tool_call_grammar.h"
#include "common/clock.h"
#include "common/error.h"
#include "model/memory_plan.h"
#include "server/protocol/api_error.h"
#include "speculative/generator.h"
#include "tokenizer/prompt.h"

namespace specula {

namespace {

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string default_name(const std::string& path) {
    std::string stem = std::filesystem::path(path).filename().string();
    if (stem.size() > 5 && stem.ends_with(".gguf")) stem.resize(stem.size() - 5);
    return stem;
}

// A prompt (or prompt + max_tokens) past the context: 400 with OpenAI's code, which litellm,
// aider and LangChain key on.
[[noreturn]] void context_exceeded(const std::string& message, const std::string& param) {
    throw ApiError(400, message, param, "invalid_request_error", "context_length_exceeded");
}

}  // namespace

ChatTokens chat_tokens(const Tokenizer& tok) {
    ChatTokens t;
    if (tok.bos() >= 0) t.bos = tok.token_text(tok.bos());
    if (tok.eos() >= 0) t.eos = tok.token_text(tok.eos());
    t.strip_bos = tok.add_bos();
    return t;
}

// A Jinja template that cannot render one user message (a limit hit, a crash-sized value) would
// fail every request: refused at load, naming the template and the way around it.
static ChatPrompter rendering(ChatPrompter p) {
    try {
        (void)p.render(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hello"}])"),
                       true);
    } catch (const Error& e) {
        fail("the chat template cannot render a one-message conversation (", e.what(),
             "); give another with --chat-template-file or --chat-template");
    }
    return p;
}

ChatPrompter choose_chat_prompter(const std::string& model_template,
                                  const std::string& template_file, const Tokenizer& tok,
                                  const char* who) {
    if (!template_file.empty())
        return rendering(load_chat_template_file(template_file, chat_tokens(tok)));
    if (!model_template.empty()) {
        std::optional<ChatPrompter> jinja;
        try {
            jinja = ChatPrompter::jinja(model_template, "the model's tokenizer.chat_template",
                                        chat_tokens(tok));
        } catch (const Error& e) {  // a file still serves, with the recognised family
            std::fprintf(stderr, "%s: warning: %s; using the built-in format instead\n", who,
                         e.what());
        }
        if (jinja) return rendering(std::move(*jinja));
        const ChatFormat f = detect_chat_format(model_template);
        return ChatPrompter::builtin(f, "recognised from the model's template");
    }
    std::fprintf(stderr,
                 "%s: the model has no tokenizer.chat_template; chat uses the default "
                 "\"User: ...\\nAssistant:\" format\n",
                 who);
    return ChatPrompter::builtin(ChatFormat::Plain, "the model has no template");
}

RuntimeOptions serve_runtime_options() {
    RuntimeOptions o;
    o.n_ctx = RuntimeOptions::kCtxDefault;
    o.open_session = false;
    o.cache_ram_mib = ServiceConfig::kDefaultCacheRamMib;
    o.logit_rows = Scheduler::kEchoChunk;
    o.log_prefix = "serve: ";
    return o;
}

Service::Service(const ServiceConfig& cfg) : cfg_(cfg) {
    if (cfg.runtime.n_seqs < 1) fail("--parallel must be >= 1, got ", cfg.runtime.n_seqs);
    if (cfg.runtime.speculative.n_draft < 0)
        fail("--draft must be >= 0 or auto, got ", cfg.runtime.speculative.n_draft);
}

void Service::load() {
    const ServiceConfig& cfg = cfg_;
    RuntimeOptions ro = cfg.runtime;
    ro.open_session = false;  // the scheduler opens one per slot
    ro.logit_rows = std::max(ro.logit_rows, Scheduler::kEchoChunk);
    rt_ = open_runtime(ro);
    const Model& target = *rt_.target;
    served_name_ = cfg.served_name.empty() ? default_name(cfg.runtime.model_path) : cfg.served_name;
    if (!cfg.chat_template.empty()) {
        const bool jinja = cfg.chat_template.find("{%") != std::string::npos ||
                           cfg.chat_template.find("{{") != std::string::npos;
        prompter_ = std::make_unique<ChatPrompter>(
            jinja ? ChatPrompter::jinja(cfg.chat_template, "--chat-template",
                                        chat_tokens(target.tokenizer()))
                  : ChatPrompter::builtin(parse_chat_format(cfg.chat_template), "--chat-template"));
    } else {
        prompter_ = std::make_unique<ChatPrompter>(
            choose_chat_prompter(target.file().get_string_or("tokenizer.chat_template", ""),
                                 cfg.chat_template_file, target.tokenizer()));
    }
    // Content is content: a client's special-token texts are tokenized as text
    // (chat/content_guard.h), unless --parse-special-in-content.
    if (!cfg.parse_special_in_content)
        prompter_->guard_content(special_token_texts(target.tokenizer()));
    if (rt_.plan.prompt_cache > 0) {
        // Pool entries come and go in sizes of tens of KB to GBs: a fixed mmap threshold (glibc
        // raises it after every large free otherwise) returns an evicted entry's memory to the
        // system at once instead of leaving it to fragment the heap (RSS would creep).
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);
        prompt_cache_ = std::make_unique<PromptCache>(size_t(rt_.plan.prompt_cache));
    }
    SchedulerConfig sc;
    sc.n_slots = cfg.runtime.n_seqs;
    sc.n_ctx = rt_.n_ctx;
    sc.n_threads = cfg.runtime.n_threads;
    sc.n_ubatch = rt_.n_ubatch;
    sc.prefill_chunk_idle = rt_.n_ubatch;
    if (cfg.max_batched_tokens > 0) {
        if (cfg.max_batched_tokens > rt_.n_ubatch)
            std::fprintf(stderr,
                         "serve: --max-num-batched-tokens %d is more than one pass takes (-ub "
                         "%d): a step evaluates at most %d prompt tokens\n",
                         cfg.max_batched_tokens, rt_.n_ubatch, rt_.n_ubatch);
        sc.prefill_chunk = sc.prefill_chunk_idle = std::min(cfg.max_batched_tokens, rt_.n_ubatch);
    }
    sc.metrics = &metrics_;
    sc.prompt_cache = prompt_cache_.get();
    metrics_.set_prompt_cache(prompt_cache_.get());
    sc.type_k = rt_.type_k;
    sc.type_v = rt_.type_v;
    sc.kv_pool = rt_.plan.kv_pool;
    sc.kv_wait_s = cfg.kv_wait_s;
    sc.prefix_min_tokens = cfg.prefix_min_tokens;
    scheduler_ = std::make_unique<Scheduler>(rt_, sc);
    sampling_ = std::make_unique<RequestSampling>(target);
    metrics_.set_kv_capacity(cfg.runtime.n_seqs, rt_.n_ctx);
    if (rt_.plan.kv_pool > 0 || scheduler_->pool_state().prefixes)
        metrics_.set_kv_pool([s = scheduler_.get()] { return s->pool_state(); });
    metrics_.set_model_name(served_name_);
}

Service::~Service() {
    metrics_.set_kv_pool({});  // the scheduler it reads goes first
}

std::string Service::describe() const {
    const Model& target = *rt_.target;
    std::string s =
        served_name_ + " (" + target.describe() + ") | ctx " + std::to_string(rt_.n_ctx) +
        " | slots " + std::to_string(scheduler_->n_slots()) + " in one batched pass x " +
        std::to_string(scheduler_->n_threads()) + " threads | chat " + prompter_->describe();
    const SpeculativeConfig& sc = rt_.speculative.config;
    if (sc.method == SpecMethod::none) return s + " | speculative: off";
    s += std::string(" | speculative: ") + method_name(sc.method);
    if (rt_.speculative.draft_model) s += " (" + default_name(sc.draft_model) + ")";
    if (target.mtp_file()) s += " (head from " + default_name(target.mtp_path()) + ")";
    return s + ", draft " + draft_length_name(sc);
}

std::vector<token_id> Service::tokenize(const std::string& text,
                                        std::span<const TextSpan> plain) const {
    try {
        return tokenize_prompt(rt_.target->tokenizer(), text, plain);
    } catch (const Error& e) {
        bad_request(e.what(), "prompt");
    }
}

PreparedRequest Service::prepare(CompletionRequest req) const {
    if (std::string why = scheduler_->models_changed(); !why.empty())
        throw ApiError(503, why, "", "server_error", "model_file_changed");
    PreparedRequest p;
    p.t_arrival = clock_type::now();
    // Any `model` is accepted, as llama-server does: one model is served and the response names
    // it (LangChain's default "gpt-3.5-turbo" or the path given to vLLM's --model just work).
    const char* prompt_param = req.chat ? "messages" : "prompt";
    // A prompt too long by its bytes alone is refused before it is tokenized.
    const auto refuse_by_bytes = [&](const std::string& text) -> const std::string& {
        const ContextFit fit =
            check_prompt_bytes(rt_.target->tokenizer(), text.size(), rt_.n_ctx, "");
        if (fit.what != ContextFit::fits) context_exceeded(fit.message, prompt_param);
        return text;
    };
    if (req.chat) {
        const std::optional<ToolCallFormat> format =
            cfg_.tool_call_format ? cfg_.tool_call_format : prompter_->tool_format();
        if (!req.tools.is_null() && !format)
            bad_request(
                "'tools' needs a chat template that writes a tool-call format this server "
                "parses (" +
                    tool_call_format_names() + "); this one (" + prompter_->describe() +
                    ") shows none (the server's --tool-call-format names one)",
                "tools");
        p.tool_format = format.value_or(ToolCallFormat::hermes);
        if (req.tool_forced) {  // the call is constrained as response_format constrains JSON
            if (req.grammar)
                bad_request(
                    "'tool_choice' forcing a call cannot be combined with "
                    "'response_format'",
                    "tool_choice");
            try {
                req.grammar = tool_call_grammar(p.tool_format, req.tools, req.tool_forced_name);
            } catch (const Error& e) {
                bad_request(e.what(), "tool_choice");
            }
        }
        // Harmony's analysis channel is reasoning even without tools.
        p.parse_tools = !req.tools.is_null() || (format && parses_without_tools(*format));
        const GuardedText chat = chat_prompt(req);
        const std::string& text = chat.text;
        const ReasoningFormat rf =
            req.reasoning_format.empty()
                ? cfg_.reasoning_format
                : parse_reasoning_format(req.reasoning_format, "reasoning_format");
        p.reasoning_open = prompt_opens_reasoning(text);
        p.split_reasoning =
            rf == ReasoningFormat::deepseek ||
            (rf == ReasoningFormat::automatic && (prompter_->mentions_think() || p.reasoning_open));
        if (!p.split_reasoning) p.reasoning_open = false;
        p.prompt = tokenize(refuse_by_bytes(text), chat.plain);
    } else if (!req.prompt_ids.empty()) {
        const int nv = rt_.target->hparams().n_vocab;
        for (token_id t : req.prompt_ids)
            if (t < 0 || t >= nv)
                bad_request("prompt token id " + std::to_string(t) +
                                " is outside the vocabulary (" + std::to_string(nv) + " tokens)",
                            "prompt");
        p.prompt = req.prompt_ids;
    } else {
        p.prompt = tokenize(refuse_by_bytes(req.prompt));
    }
    // Past the context: until the context is full (stop reason "context").
    if (req.lenient_limits && req.max_tokens > 0 &&
        int64_t(p.prompt.size()) + req.max_tokens > rt_.n_ctx)
        req.max_tokens = -1;
    const ContextFit fit =
        check_context(int(p.prompt.size()), req.max_tokens, rt_.n_ctx, "", "max_tokens");
    if (fit.what != ContextFit::fits)
        context_exceeded(fit.message,
                         fit.what == ContextFit::prompt_too_long ? prompt_param : "max_tokens");
    sampling_->check(req);
    for (const int32_t t : req.stop_token_ids)
        if (t >= rt_.target->hparams().n_vocab)
            bad_request("stop token id " + std::to_string(t) + " is outside the vocabulary (" +
                            std::to_string(rt_.target->hparams().n_vocab) + " tokens)",
                        "stop_token_ids");
    p.n_predict = req.max_tokens;
    p.req = std::move(req);
    return p;
}

// reasoning_effort as the template takes it: its reasoning_effort variable (gpt-oss: low,
// medium, high; none and minimal as low) and its enable_thinking switch (off for none and
// minimal); a kwarg the request set itself wins. A template with neither: 400.
void Service::apply_reasoning_effort(const CompletionRequest& req,
                                     nlohmann::ordered_json& kwargs) const {
    const std::string& e = req.reasoning_effort;
    if (e.empty()) return;
    if (!prompter_->has_thinking_switch() && !prompter_->has_effort_variable()) {
        if (req.lenient_limits) return;
        bad_request("'reasoning_effort': the model's chat template (" + prompter_->describe() +
                        ") has no thinking mode to set",
                    "reasoning_effort");
    }
    const bool off = e == "none" || e == "minimal";
    if (!kwargs.is_object()) kwargs = nlohmann::ordered_json::object();
    if (prompter_->has_effort_variable() && !kwargs.contains("reasoning_effort"))
        kwargs["reasoning_effort"] = off ? "low" : e == "xhigh" ? "high" : e;
    if (prompter_->has_thinking_switch() && !kwargs.contains("enable_thinking"))
        kwargs["enable_thinking"] = !off;
}

GuardedText Service::chat_prompt(const CompletionRequest& req) const {
    GuardedText g;
    std::string& text = g.text;
    nlohmann::ordered_json kwargs = req.chat_template_kwargs;
    apply_reasoning_effort(req, kwargs);
    if (cfg_.reasoning_budget == 0 && !(kwargs.is_object() && kwargs.contains("enable_thinking")))
        kwargs["enable_thinking"] = false;
    try {
        g = prompter_->render_guarded(req.chat_messages, req.add_generation_prompt, req.tools,
                                      kwargs);
    } catch (const Error& e) {
        bad_request(e.what(), "messages");
    }
    if (req.continue_final_message) {
        // As vLLM: the prompt ends where the last (assistant) message's text ends, so the reply
        // continues it instead of closing the turn.
        const std::string& last = req.messages.back().content;
        const size_t at = last.empty() ? std::string::npos : text.rfind(last);
        if (at == std::string::npos)
            bad_request(
                "continue_final_message: the chat template does not write the last "
                "message's text as given",
                "continue_final_message");
        text.resize(at + last.size());
        while (!g.plain.empty() && g.plain.back().end > text.size()) {
            if (g.plain.back().begin < text.size()) {
                g.plain.back().end = text.size();
                break;
            }
            g.plain.pop_back();
        }
    }
    return g;
}

// A request whose client left while it waited for a slot: counted as aborted, nothing generated.
Completion Service::abandoned_in_queue(const PreparedRequest& p) {
    Completion c;
    c.finish_reason = "abort";
    c.stats.n_prompt = int(p.prompt.size());
    c.stats.stop_reason = "callback";
    c.e2e_s = seconds_since(p.t_arrival);
    metrics_.record_request(c.stats, c.finish_reason, c.e2e_s, 0);
    std::fprintf(stderr, "serve: a queued request was abandoned by its client\n");
    return c;
}

// echo: the prompt's text (its logprobs, when asked, come from the scheduler: Job::echo_logprobs).
std::string Service::echo_text(const PreparedRequest& p) const {
    if (p.req.prompt_ids.empty()) return p.req.prompt;  // the text as sent
    // Token ids: their text, as llama.cpp detokenizes it.
    const Tokenizer& tok = rt_.target->tokenizer();
    std::vector<token_id> ids = p.prompt;
    if (!ids.empty() && ids[0] == tok.bos()) ids.erase(ids.begin());
    return tok.decode(ids, /*remove_special=*/false, /*unparse_special=*/true);
}

Service::Ticket::~Ticket() {
    leave();
    job->cancel = true;  // followed no further: a queued or running request stops
}

void Service::Ticket::leave() {
    if (!left) started ? metrics.add_running(-1) : metrics.add_waiting(-1);
    left = true;
}

std::shared_ptr<Service::Ticket> Service::submit(const PreparedRequest& p, int choice) {
    const CompletionRequest& r = p.req;
    auto job = std::make_shared<Job>();
    job->prompt = p.prompt;
    job->gen = gen_params(rt_, p.n_predict, r.ignore_eos, r.n_draft);
    job->gen.trace = r.trace;
    // --draft auto, unless the request sets its own length: the slot's controller learns on.
    job->draft_auto = rt_.speculative.config.draft_auto && !r.n_draft;
    job->sampling = sampling_->sampling(r, choice);
    job->constraints = sampling_->constraints(r);
    job->n_logprobs = r.logprobs;
    const bool echo_logprobs = r.echo && r.logprobs >= 0;
    job->echo_logprobs = echo_logprobs || r.prompt_logprobs >= 0;
    job->n_prompt_top = std::max(echo_logprobs ? r.logprobs : 0, r.prompt_logprobs);
    job->stops = r.stop;
    job->include_stop_str = r.include_stop_str;
    job->stop_token_ids = r.stop_token_ids;
    job->t_arrival = p.t_arrival;
    job->running_stats = r.timings_per_token;

    metrics_.add_waiting(1);
    auto t = std::make_shared<Ticket>(metrics_, job);
    scheduler_->submit(job);
    return t;
}

// The scheduler's failure as the exception the HTTP layer answers: the KV pool's wait timing out
// is 503 kv_pool_full, anything else an Error.
static void throw_job_error(const Job& job) {
    if (job.error_code == "kv_pool_full")
        throw ApiError(503, job.error, "", "server_error", "kv_pool_full");
    throw Error(job.error);
}

// Moves the request from the waiting gauge to the running one, once; job.mu held.
void Service::mark_started(Ticket& t, const PreparedRequest& p) {
    if (t.started) return;
    t.started = true;
    metrics_.add_waiting(-1);
    metrics_.add_running(1);
    metrics_.record_queue_time(seconds_since(p.t_arrival));
}

bool Service::wait_started(Ticket& t, const PreparedRequest& p,
                           const std::function<bool()>& keep_waiting) {
    Job& job = *t.job;
    std::unique_lock lock(job.mu);
    for (;;) {
        job.cv.wait_for(lock, std::chrono::milliseconds(100),
                        [&] { return job.done || job.started; });
        if (job.started) {
            mark_started(t, p);
            return true;
        }
        if (job.done) break;
        lock.unlock();
        if ((keep_waiting && !keep_waiting()) || cancel_all_.load()) job.cancel = true;
        lock.lock();
    }
    if (!job.error.empty()) throw_job_error(job);
    lock.unlock();
    t.leave();
    abandoned_in_queue(p);
    return false;
}

Completion Service::run(const PreparedRequest& p, const PieceSink& sink,
                        const std::function<bool()>& keep_waiting, int choice) {
    const std::shared_ptr<Ticket> t = submit(p, choice);
    return follow(*t, p, sink, keep_waiting);
}

Completion Service::follow(Ticket& t, const PreparedRequest& p, const PieceSink& sink,
                           const std::function<bool()>& keep_waiting) {
    const CompletionRequest& r = p.req;
    Job* job = t.job.get();
    bool started = false, cancelled = false;
    Completion c;
    if (r.echo) c.echo = echo_text(p);
    std::vector<TokenPiece> pieces;
    std::unique_lock lock(job->mu);
    for (;;) {
        job->cv.wait_for(lock, std::chrono::milliseconds(100), [&] {
            return job->done || !job->pieces.empty() || job->started != started;
        });
        if (job->started && !started) {
            started = true;
            mark_started(t, p);
            c.prompt_logprobs = job->prompt_logprobs;  // set before started
            c.slot_id = job->slot_id;
        }
        pieces.swap(job->pieces);
        // Logprobs reach the job before the text of their tokens.
        c.logprobs.insert(c.logprobs.end(), job->logprobs.begin() + long(c.logprobs.size()),
                          job->logprobs.end());
        const bool done = job->done;
        if (r.timings_per_token) c.stats = job->stats;
        lock.unlock();
        if (!started && !done && keep_waiting && !keep_waiting()) job->cancel = true;
        if (!cancelled && !done && cancel_all_.load()) {  // shutting down: stop where it is
            cancelled = true;
            job->cancel = true;
        }
        for (const auto& piece : pieces) {
            c.text += piece.text;
            if (!piece.text.empty()) c.n_text_tokens = std::max(c.n_text_tokens, piece.index + 1);
        }
        if (!cancelled && !pieces.empty() && !sink(c, pieces)) {
            cancelled = true;
            job->cancel = true;
        }
        pieces.clear();
        lock.lock();
        if (done && job->pieces.empty()) break;
    }
    if (!job->error.empty()) throw_job_error(*job);
    t.leave();
    if (!started) return abandoned_in_queue(p);
    c.stats = job->stats;
    c.ttft_s = job->ttft_s;
    c.n_cached = job->n_cached;
    c.slot_id = job->slot_id;
    c.text_stopped = job->text_stopped;
    c.stop_word = job->stop_word;
    const int slot_id = c.slot_id;
    const bool text_stopped = c.text_stopped;
    lock.unlock();

    if (cancelled) {
        c.finish_reason = "abort";
    } else if (text_stopped || c.stats.stop_reason == "eog") {
        c.finish_reason = "stop";
    } else {
        c.finish_reason = "length";
    }
    c.e2e_s = seconds_since(p.t_arrival);
    metrics_.record_request(c.stats, c.finish_reason, c.e2e_s, c.ttft_s);
    metrics_.record_cached(c.n_cached, c.stats.n_prompt);
    std::fprintf(stderr,
                 "serve: slot %d | prompt %d (%d cached) | generated %d (%s) | %.1f tok/s | "
                 "drafted %ld, accepted %ld | %.0f ms\n",
                 slot_id, c.stats.n_prompt, c.n_cached, c.stats.n_generated,
                 c.finish_reason.c_str(), c.stats.gen_tps(), c.stats.n_drafted, c.stats.n_accepted,
                 c.e2e_s * 1e3);
    return c;
}

}  // namespace specula
