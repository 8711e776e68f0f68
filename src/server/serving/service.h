// Service: what the HTTP layer calls to run one completion. It owns the loaded target (and draft)
// Model, the chat format, the slot pool and the metrics. prepare() turns a parsed request into
// prompt tokens and checks it against the model (context, draft length, model name): ApiError on
// failure. run() hands the request to the scheduler (server/serving/scheduler.h: every busy slot
// shares one batched target pass per step, on all threads) and, on the calling thread, hands the
// text out as it becomes safe to send (server/serving/text_stream.h); when the sink returns false
// (the client is gone) generation stops and the slot is freed.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_prompt.h"
#include "chat/reasoning.h"
#include "common/clock.h"
#include "model/memory_plan.h"
#include "model/session.h"
#include "runtime/runtime.h"
#include "server/protocol/request.h"
#include "server/protocol/sampling_setup.h"
#include "server/serving/logprobs.h"
#include "server/serving/metrics.h"
#include "server/serving/prompt_cache.h"
#include "server/serving/scheduler.h"
#include "server/serving/text_stream.h"
#include "speculative/config.h"
#include "speculative/stats.h"

namespace specula {

// serve's runtime: no session of its own (the scheduler opens the slots), the default context
// when -c is not given (RuntimeOptions::kCtxDefault), the prompt cache on, "serve: " lines.
RuntimeOptions serve_runtime_options();

struct ServiceConfig {
    // The model, drafter, context, threads, KV types, slots (n_seqs: --parallel), their KV pool,
    // the prompt cache and the memory check (runtime/runtime.h). One sequence's context: any
    // request may use all of it (-c / --max-model-len); with several slots they draw from one KV
    // pool (server/serving/kv_pool.h), never a split context. open_session is false: the scheduler
    // opens its slots.
    RuntimeOptions runtime = serve_runtime_options();
    std::string slot_save_path;  // --slot-save-path: where /slots/{id}?action=save writes ("": off)
    double kv_wait_s = 600;      // --kv-wait-timeout: how long a request waits for pool room
    // --prefix-min-tokens: prompts sharing at least this many tokens share one copy of their KV
    // rows, evaluated once (server/serving/prefix_blocks.h; 0: off).
    int prefix_min_tokens = 64;
    // --max-num-batched-tokens (vLLM's): prompt tokens a step evaluates over all prefilling
    // requests, at most -ub (0: 64, and -ub for a lone prompt while nothing decodes).
    int max_batched_tokens = 0;
    std::string served_name;  // "" : the model file's name without .gguf
    // --cache-ram's default (runtime.cache_ram_mib): llama-server's 8192 MiB, but at most half
    // of the memory the plan leaves unless given, so the default never stops a start.
    static constexpr long kDefaultCacheRamMib = 8192;
    // --chat-template-file: a Jinja template used instead of the model's ("": the model's
    // tokenizer.chat_template, or a built-in format when it has none).
    std::string chat_template_file;
    // --chat-template, as llama-server's: a built-in format's name (chatml, llama2, llama3,
    // mistral, gemma, phi3, plain) or a Jinja template's text ("": not given).
    std::string chat_template;
    ReasoningFormat reasoning_format = ReasoningFormat::automatic;  // --reasoning-format
    // --reasoning-budget, as llama-server: -1 unlimited, 0 no thinking (the template gets
    // enable_thinking: false unless the request's chat_template_kwargs say otherwise).
    int reasoning_budget = -1;
    // llama-server's --temp, --top-k, --top-p, --min-p, --seed, -n and penalties (vLLM's --seed):
    // every request's defaults (server/protocol/request.h).
    RequestDefaults request_defaults;
    // --tool-call-format (nullopt: auto, the template's; chat/tool_calls.h).
    std::optional<ToolCallFormat> tool_call_format;
    // --parse-special-in-content: a client's special-token texts become special tokens (the old
    // behaviour; llama-server's). Default: they are text (chat/content_guard.h).
    bool parse_special_in_content = false;
};

// The vocabulary's BOS/EOS texts for chat templates, and whether a leading BOS text is dropped.
ChatTokens chat_tokens(const Tokenizer& tok);

// How chats are formatted: --chat-template-file (Error naming the file when bad), else the
// model's template with the Jinja engine, else (no template, or one that does not parse: said on
// stderr after `who`) a built-in format.
ChatPrompter choose_chat_prompter(const std::string& model_template,
                                  const std::string& template_file, const Tokenizer& tok,
                                  const char* who = "serve");

struct PreparedRequest {
    CompletionRequest req;
    std::vector<token_id> prompt;
    int n_predict = -1;
    // chat: split <think> reasoning from the answer (chat/reasoning.h), and whether the prompt
    // already opened the block.
    bool split_reasoning = false, reasoning_open = false;
    // chat with tools (or a harmony template): calls become tool_calls, in this format.
    bool parse_tools = false;
    ToolCallFormat tool_format = ToolCallFormat::hermes;
    clock_type::time_point t_arrival;  // latency metrics count queueing
};

struct Completion {
    std::string text;
    std::string echo;  // echo: the prompt's text (text does not include it)
    // With req.logprobs >= 0: one per generated token (logprobs.h), and with echo one per
    // prompt token.
    std::vector<TokenLogprob> logprobs, prompt_logprobs;
    int n_text_tokens =
        0;  // generated tokens that put text in `text` (a stop string cuts later ones)
    std::string finish_reason;  // "stop", "length" or "abort"
    bool text_stopped = false;  // a stop string ended it (llama-server's stop_type "word")
    std::string stop_word;      // which one (llama-server's stopping_word)
    int slot_id = -1;
    SpecStats stats;
    double ttft_s = 0, e2e_s = 0;
    int n_cached = 0;  // prompt tokens the slot already held (not evaluated again)
};

// Receives text as it becomes safe to send, with the completion so far (its logprobs); returns
// false to cancel (client disconnected).
using PieceSink = std::function<bool(const Completion&, const std::vector<TokenPiece>&)>;

// Made in two steps, so that the HTTP server can answer (503 "Loading model") while the models
// load: the constructor checks the configuration, load() loads the models and builds the slots
// (throws Error). Every other member except metrics() needs load() to have returned.
class Service {
  public:
    explicit Service(const ServiceConfig& config);  // checks the configuration; throws Error
    ~Service();
    void load();

    const std::string& served_name() const { return served_name_; }
    const Model& target() const { return *rt_.target; }
    const ChatPrompter& chat_prompter() const { return *prompter_; }
    int n_ctx() const { return rt_.n_ctx; }
    const RequestDefaults& request_defaults() const { return cfg_.request_defaults; }
    int64_t kv_pool() const { return rt_.plan.kv_pool; }  // 0: no pool (one slot)
    int n_slots() const { return scheduler_->n_slots(); }
    bool slot_busy(int i) const { return scheduler_->slot_busy(i); }
    // POST /slots/{id}?action=...: runs between scheduler steps; returns when done.
    void slot_action(const std::shared_ptr<SlotAction>& a) { scheduler_->slot_action(a); }
    const std::string& slot_save_path() const { return cfg_.slot_save_path; }
    bool speculative() const { return cfg_.runtime.speculative.method != SpecMethod::none; }
    Metrics& metrics() { return metrics_; }
    std::string describe() const;  // one line for the startup log

    PreparedRequest prepare(CompletionRequest req) const;
    // The chat request's prompt text as the template renders it (POST /apply-template), with
    // the spans that are a client's special-token texts (chat/content_guard.h; none with
    // --parse-special-in-content); a template that fails is ApiError 400 naming its error.
    GuardedText chat_prompt(const CompletionRequest& req) const;
    // keep_waiting: asked every 100 ms while the request is queued for a slot; false gives up
    // (finish_reason "abort", nothing generated).
    // `choice`: which of the request's n choices (it advances a given seed).
    Completion run(const PreparedRequest& p, const PieceSink& sink,
                   const std::function<bool()>& keep_waiting = {}, int choice = 0);

    // run() in steps, so that the HTTP layer can wait for a slot before its status line:
    // submit() hands the choice to the scheduler; wait_started() returns true once it holds a
    // slot, false when it ended in the queue (keep_waiting said no, or the server is shutting
    // down; counted as aborted), and throws what the queue refused (ApiError 503 kv_pool_full:
    // the KV pool stayed full for --kv-wait-timeout); follow() is the rest of run(). A Ticket
    // dropped unfollowed cancels its request.
    struct Ticket {
        Ticket(Metrics& m, std::shared_ptr<Job> j) : metrics(m), job(std::move(j)) {}
        ~Ticket();
        void leave();  // the request leaves the waiting or running gauge, once

        Metrics& metrics;
        std::shared_ptr<Job> job;
        bool started = false, left = false;
    };
    std::shared_ptr<Ticket> submit(const PreparedRequest& p, int choice);
    bool wait_started(Ticket& t, const PreparedRequest& p,
                      const std::function<bool()>& keep_waiting);
    Completion follow(Ticket& t, const PreparedRequest& p, const PieceSink& sink,
                      const std::function<bool()>& keep_waiting);
    // Shutting down (the drain deadline passed): every run(), queued or generating, ends within
    // ~100 ms as cancelled (finish_reason "abort", what it generated so far), and so do later ones.
    void cancel_all() { cancel_all_.store(true); }
    bool cancelling_all() const { return cancel_all_.load(); }

  private:
    // reasoning_effort as the template's kwargs (its enable_thinking switch, its
    // reasoning_effort variable); ApiError 400 for a template with neither.
    void apply_reasoning_effort(const CompletionRequest& req, nlohmann::ordered_json& kwargs) const;
    std::vector<token_id> tokenize(const std::string& text,
                                   std::span<const TextSpan> plain = {}) const;
    Completion abandoned_in_queue(const PreparedRequest& p);
    void mark_started(Ticket& t, const PreparedRequest& p);
    std::string echo_text(const PreparedRequest& p) const;

    ServiceConfig cfg_;
    Runtime rt_;  // the target, the draft model loaded once for every slot, the plan
    std::unique_ptr<PromptCache> prompt_cache_;  // --cache-ram (null: off)
    std::string served_name_;
    std::unique_ptr<ChatPrompter> prompter_;
    Metrics metrics_;
    std::unique_ptr<RequestSampling> sampling_;
    std::atomic<bool> cancel_all_{false};
    std::unique_ptr<Scheduler> scheduler_;  // last: its thread stops before the rest goes
};

}  // namespace specula
