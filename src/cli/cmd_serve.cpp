// `specula serve`: the OpenAI-compatible HTTP server (src/server/). Options follow llama-server
// (-m, -md, --draft, -c, --parallel, --host, --port, --api-key, -t) with vLLM's spellings as
// aliases (--model, --speculative-model, --num-speculative-tokens, --speculative-config,
// --served-model-name, `serve MODEL` positional, --max-model-len, --gpu-memory-utilization (the
// KV pool's share of the memory); --tensor-parallel-size is accepted with a warning);
// llama-server's -np / -ngl / -ngld / -cd come through cli/llama_flags.h). The port is bound
// first (a busy one fails before anything loads) and answers 503 "Loading model" while the models
// load; "listening on" is logged once it serves. While the models load SIGINT / SIGTERM end the
// process at once (common/stop_signals.h); after, the first one drains the server (no new
// requests, /health 503 "draining", those in flight finish within --drain-timeout, then exit 0)
// and a second one cuts the drain short.
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "chat/tool_calls.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/repetition_options.h"
#include "cli/speculative_options.h"
#include "common/error.h"
#include "common/stop_signals.h"
#include "common/threadpool.h"
#include "server/server.h"
#include "server/serving/service.h"

namespace specula::cli {

namespace {

struct ServeOptions {
    ServiceConfig service;
    HttpConfig http;
    SpeculativeFlags spec;  // cli/speculative_options.h
    std::string model_positional;
    int tensor_parallel = 1;
    double gpu_memory_utilization = -1;
    std::string cache_type_k = "f16", cache_type_v = "f16";  // -ctk / -ctv
    long cache_ram = kCacheRamNotGiven;                      // --cache-ram (MiB)
    static constexpr long kCacheRamNotGiven = -1000000;
    std::string reasoning_format = "auto";
    int ctx_total = -1, max_model_len = -1;  // -c (llama-server: the total), --max-model-len (vLLM)
    int max_num_seqs = -1;                   // vLLM's --max-num-seqs (= --parallel)
    CLI::Option* parallel_opt = nullptr;     // --parallel (-np), to tell whether it was given
    std::string dtype = "auto";
    bool kv_unified = false;  // -kvu: what the pool always is
    // llama-server's sampling defaults and vLLM's launch-line flags (resolve_launch_flags).
    std::string seed = "-1";
    std::vector<std::string> dry_breakers;  // --dry-sequence-breaker
    std::string tool_call_parser, reasoning_parser, kv_cache_dtype;
    bool no_context_shift = false, auto_tool_choice = false, enforce_eager = false;
    bool prefix_caching = false, trust_remote_code = false, disable_log_requests = false;
    bool no_prefix_caching = false;  // vLLM's --no-enable-prefix-caching: no shared blocks
    double drain_timeout = 30;       // --drain-timeout
    std::string tool_call_format = "auto";
};

// Made on first use (inside main's error handling): its defaults read the environment's
// placement, which throws Error for a bad SPECULA_NGL.
ServeOptions& serve_options() {
    static ServeOptions o;
    return o;
}

// vLLM's --reasoning-parser names: the <think> split (deepseek) or the model's own (auto).
std::string reasoning_format_for_parser(const std::string& parser) {
    for (const char* name : {"deepseek_r1", "deepseek_v3", "qwen3", "glm45", "hunyuan_a13b",
                             "granite", "mistral", "ernie45"})
        if (parser == name) return "deepseek";
    if (parser == "openai_gptoss" || parser == "gpt_oss") return "auto";
    fail("--reasoning-parser ", parser,
         ": not supported; give one of deepseek_r1, deepseek_v3, qwen3, glm45, hunyuan_a13b, "
         "granite, mistral, ernie45 (a <think> block) or openai_gptoss");
}

// The launch lines model cards print: llama-server's sampling defaults, vLLM's tool, reasoning,
// seed and cache flags.
void resolve_launch_flags(ServeOptions& o) {
    RequestDefaults& d = o.service.request_defaults;
    if (!(d.temperature >= 0 && d.temperature <= 2))
        fail("--temp must be in [0, 2], got ", d.temperature);
    if (!(d.top_p >= 0 && d.top_p <= 1)) fail("--top-p must be in [0, 1], got ", d.top_p);
    if (!(d.min_p >= 0 && d.min_p <= 1)) fail("--min-p must be in [0, 1], got ", d.min_p);
    if (!(d.typical_p >= 0 && d.typical_p <= 1))
        fail("--typical must be in [0, 1], got ", d.typical_p);
    if (!std::isfinite(d.top_n_sigma))
        fail("--top-nsigma must be a finite number, got ", d.top_n_sigma);
    if (d.top_k < -1) fail("--top-k must be >= -1, got ", d.top_k);
    if (d.max_tokens < -1) fail("-n (--n-predict) must be >= -1, got ", d.max_tokens);
    if (!(d.repeat_penalty > 0)) fail("--repeat-penalty must be > 0, got ", d.repeat_penalty);
    if (d.repeat_last_n < -1 && d.repeat_last_n != RequestDefaults::kRepeatLastNUnset)
        fail("--repeat-last-n must be >= -1, got ", d.repeat_last_n);
    resolve_dry_options(d.dry, o.dry_breakers, /*escape=*/true);
    check_xtc_options(d.xtc_probability, d.xtc_threshold);
    d.seed = parse_seed(o.seed, /*allow_random=*/true);
    if (o.seed == "-1") d.seed = 0xFFFFFFFFu;  // each request draws its own
    if (!o.tool_call_parser.empty()) {
        if (o.tool_call_format != "auto")
            fail("give --tool-call-parser or --tool-call-format, not both");
        o.tool_call_format =
            tool_call_format_name(tool_call_format_for_vllm_parser(o.tool_call_parser));
    }
    if (!o.reasoning_parser.empty()) {
        if (o.reasoning_format != "auto")
            fail("give --reasoning-parser or --reasoning-format, not both");
        o.reasoning_format = reasoning_format_for_parser(o.reasoning_parser);
    }
    if (!o.kv_cache_dtype.empty() && o.kv_cache_dtype != "auto") {
        if (o.kv_cache_dtype.rfind("fp8", 0) != 0)
            fail("--kv-cache-dtype ", o.kv_cache_dtype, ": give auto or fp8 (fp8_e4m3, fp8_e5m2)");
        o.cache_type_k = o.cache_type_v = "q8_0";
        std::fprintf(stderr,
                     "serve: --kv-cache-dtype %s: the KV cache is q8_0, the 8-bit type specula "
                     "has (-ctk q8_0 -ctv q8_0)\n",
                     o.kv_cache_dtype.c_str());
    }
}

void resolve(ServeOptions& o) {
    if (!o.model_positional.empty()) {
        if (!o.service.runtime.model_path.empty() &&
            o.service.runtime.model_path != o.model_positional)
            fail("two models given: '", o.model_positional, "' and -m/--model '",
                 o.service.runtime.model_path, "'");
        o.service.runtime.model_path = o.model_positional;
    }
    if (o.service.runtime.model_path.empty()) fail("no model: give MODEL or -m/--model");
    if (o.tensor_parallel < 1) fail("--tensor-parallel-size must be >= 1, got ", o.tensor_parallel);
    if (o.tensor_parallel != 1)
        std::fprintf(stderr,
                     "warning: --tensor-parallel-size %d ignored: specula runs on one device "
                     "(the CPU, or one GPU with -ngl N)\n",
                     o.tensor_parallel);
    if (o.gpu_memory_utilization >= 0) {
        if (!(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1))
            fail("--gpu-memory-utilization must be in (0, 1], got ", o.gpu_memory_utilization);
        o.service.runtime.memory_fraction = o.gpu_memory_utilization;
    }
    if (o.service.runtime.kv_pool < 0)
        fail("--kv-pool must be >= 0 positions, got ", o.service.runtime.kv_pool);
    if (o.service.max_batched_tokens < 0)
        fail("--max-num-batched-tokens must be >= 1 (0: the default), got ",
             o.service.max_batched_tokens);
    if (o.service.prefix_min_tokens < 0)
        fail("--prefix-min-tokens must be >= 0, got ", o.service.prefix_min_tokens);
    if (o.no_prefix_caching) o.service.prefix_min_tokens = 0;
    if (!(o.service.kv_wait_s > 0 && o.service.kv_wait_s <= 86400))
        fail("--kv-wait-timeout must be in (0, 86400] seconds, got ", o.service.kv_wait_s);
    if (o.ctx_total >= 0 && o.max_model_len >= 0)
        fail(
            "give -c (--ctx-size) or --max-model-len (vLLM's name for it), "
            "not both");
    // -c 0: the model's training context (runtime/runtime.h); not given: at most 4096.
    RuntimeOptions& rt = o.service.runtime;
    if (o.max_model_len == 0) fail("--max-model-len must be >= 1, got 0");
    if (o.max_num_seqs >= 0) {
        if (o.max_num_seqs < 1) fail("--max-num-seqs must be >= 1, got ", o.max_num_seqs);
        if (o.parallel_opt && o.parallel_opt->count() > 0 && rt.n_seqs != o.max_num_seqs)
            fail("give --parallel (-np) or --max-num-seqs (vLLM's name for it), not both");
        rt.n_seqs = o.max_num_seqs;
    }
    // A launch line in vLLM's words (`serve MODEL`, --max-num-seqs, --gpu-memory-utilization)
    // with no context flag: vLLM's sizing, each request up to the model's training context (its
    // max_model_len default) and the pool from the memory fraction, not llama-server's -c total.
    const bool vllm_line =
        !o.model_positional.empty() || o.max_num_seqs >= 0 || o.gpu_memory_utilization >= 0;
    if (o.max_model_len >= 0 || (o.ctx_total < 0 && vllm_line)) {
        rt.n_ctx = std::max(o.max_model_len, 0);  // 0: the training context
        rt.ctx_is_total = false;
    } else {
        if (o.ctx_total < -1) fail("-c (--ctx-size) must be >= 0, got ", o.ctx_total);
        rt.n_ctx = o.ctx_total == -1 ? RuntimeOptions::kCtxDefault : o.ctx_total;
        rt.ctx_is_total = true;
    }
    // vLLM's serve flags that change nothing here.
    if (o.dtype != "auto")
        fail("--dtype ", o.dtype,
             ": not supported (the weights run in the GGUF file's own types; only --dtype auto)");
    o.service.runtime.speculative = parse_speculative_cli(o.spec, "serve");
    if (o.cache_ram != ServeOptions::kCacheRamNotGiven) {
        o.service.runtime.cache_ram_mib = o.cache_ram;
        o.service.runtime.cache_ram_given = true;
        if (o.cache_ram < -1)
            fail(
                "--cache-ram must be -1 (what the memory plan leaves), 0 (off) or a size in MiB, "
                "got ",
                o.cache_ram);
    }
    resolve_launch_flags(o);
    o.service.runtime.type_k = parse_kv_type(o.cache_type_k, "-ctk (--cache-type-k)");
    o.service.runtime.type_v = parse_kv_type(o.cache_type_v, "-ctv (--cache-type-v)");
    if (o.http.port < 0 || o.http.port > 65535)
        fail("--port must be in [0, 65535], got ", o.http.port);
    if (!o.service.slot_save_path.empty() &&
        !std::filesystem::is_directory(o.service.slot_save_path))
        fail("--slot-save-path '", o.service.slot_save_path, "' is not a directory");
    if (!(o.drain_timeout >= 0 && o.drain_timeout <= 86400))
        fail("--drain-timeout must be in [0, 86400] seconds, got ", o.drain_timeout);
    if (o.service.runtime.n_seqs < 1 || o.service.runtime.n_seqs > 256)
        fail(o.max_num_seqs >= 0 ? "--max-num-seqs must be in [1, 256], got "
                                 : "--parallel must be in [1, 256], got ",
             o.service.runtime.n_seqs);
    if (o.service.runtime.n_threads < 0)
        fail("-t (--threads) must be >= 1, got ", o.service.runtime.n_threads);
    check_http_config(o.http);  // before any model loads
    o.service.reasoning_format = parse_reasoning_format(o.reasoning_format, "--reasoning-format");
    if (o.service.reasoning_budget != -1 && o.service.reasoning_budget != 0)
        fail(
            "--reasoning-budget: only -1 (unlimited) and 0 (no thinking) are supported, as in "
            "llama-server; got ",
            o.service.reasoning_budget);
    o.service.tool_call_format = parse_tool_call_format(o.tool_call_format, "--tool-call-format");
    // A bad template file fails before the model loads (it is read again with the model's tokens).
    if (!o.service.chat_template_file.empty())
        (void)load_chat_template_file(o.service.chat_template_file, {});
    if (!o.service.chat_template.empty() && !o.service.chat_template_file.empty())
        fail("give --chat-template or --chat-template-file, not both");
    const std::string& ct = o.service.chat_template;
    if (!ct.empty() && ct.find("{%") == std::string::npos && ct.find("{{") == std::string::npos)
        (void)parse_chat_format(ct);  // an unknown name fails before the model loads
    if (o.service.runtime.n_threads > max_pool_threads())
        fail("-t (--threads) must be at most ", max_pool_threads(),
             " (4x the hardware threads), got ", o.service.runtime.n_threads);
}

// The model, drafter, context and KV pool options.
void add_serve_model_options(CLI::App& cmd, ServeOptions& o) {
    cmd.add_option("-m,--model", o.service.runtime.model_path, "target GGUF model");
    cmd.add_option("model", o.model_positional, "target GGUF model (as `vllm serve MODEL`)");
    add_speculative_options(cmd, o.spec);
    cmd.add_option("--ubatch-size", o.service.runtime.n_ubatch,
                   "the most tokens one pass of a slot takes (llama.cpp's -ub)")
        ->capture_default_str();
    cmd.add_option(
        "-c,--ctx-size", o.ctx_total,
        "context of one request (0: the model's training context; default: that, at "
        "most 4096); with --parallel N the slots share it as one KV pool, as llama-server's "
        "unified cache (-kvu), unless --kv-pool");
    cmd.add_option("--max-model-len", o.max_model_len,
                   "context of one request (vLLM's); the slots' KV pool then takes "
                   "--gpu-memory-utilization of the available memory");
    cmd.add_option("--kv-pool", o.service.runtime.kv_pool,
                   "KV positions all --parallel slots share (at least one context); a request "
                   "starts when its prompt fits with room to grow, and the youngest running "
                   "request is preempted (resumed later) when an older one needs its room");
    cmd.add_option("--kv-wait-timeout", o.service.kv_wait_s,
                   "seconds a request waits for room in the KV pool before it ends with an "
                   "error (default 600)");
    cmd.add_option("--prefix-min-tokens", o.service.prefix_min_tokens,
                   "prompts sharing at least this many tokens (a system prompt and tools) share "
                   "one copy of their KV rows, evaluated once (default 64; 0: off)");
    cmd.add_flag("--kv-unified", o.kv_unified,
                 "llama-server's; always: the slots share one KV pool");
    cmd.add_option("--max-num-batched-tokens", o.service.max_batched_tokens,
                   "vLLM's: prompt tokens one step evaluates over all prefilling requests, "
                   "beside the decoding ones' rows (default: 64, and -ub for a lone prompt while "
                   "nothing decodes; at most -ub)");
}

// Every request's sampling defaults and vLLM's launch-line flags.
void add_serve_request_options(CLI::App& cmd, ServeOptions& o) {
    RequestDefaults& d = o.service.request_defaults;
    const char* dflt = "every request's default (a request's own field wins)";
    cmd.add_option("--temp", d.temperature, dflt)->capture_default_str()->group("Sampling");
    cmd.add_option("--top-k", d.top_k, dflt)->capture_default_str()->group("Sampling");
    cmd.add_option("--top-p", d.top_p, dflt)->capture_default_str()->group("Sampling");
    cmd.add_option("--min-p", d.min_p, dflt)->capture_default_str()->group("Sampling");
    cmd.add_option("--typical", d.typical_p, dflt)->capture_default_str()->group("Sampling");
    cmd.add_option("--top-nsigma", d.top_n_sigma, dflt)->capture_default_str()->group("Sampling");
    cmd.add_option("--presence-penalty", d.presence_penalty, dflt)->group("Sampling");
    cmd.add_option("--frequency-penalty", d.frequency_penalty, dflt)->group("Sampling");
    cmd.add_option("--repeat-penalty", d.repeat_penalty, dflt)->group("Sampling");
    cmd.add_option("--repeat-last-n", d.repeat_last_n, dflt)->group("Sampling");
    add_dry_options(cmd, d.dry, o.dry_breakers, "Sampling");
    add_xtc_options(cmd, d.xtc_probability, d.xtc_threshold, "Sampling");
    cmd.add_option("-s,--seed", o.seed, "every request's default seed (-1: each its own)")
        ->group("Sampling");
    cmd.add_option("-n,--n-predict", d.max_tokens,
                   "every request's default max_tokens (-1: until the end or a full context)")
        ->group("Sampling");
    cmd.add_flag("--no-context-shift", o.no_context_shift,
                 "llama-server's; always: a full context ends the request (finish_reason "
                 "length), nothing is shifted out");
    cmd.add_flag("--enable-auto-tool-choice", o.auto_tool_choice,
                 "vLLM's; always: tool calls are parsed whenever a request has tools");
    cmd.add_option("--tool-call-parser", o.tool_call_parser,
                   "vLLM's parser name: hermes, qwen, llama3_json, llama4_json, mistral, "
                   "qwen3_coder, openai (= --tool-call-format)");
    cmd.add_option("--reasoning-parser", o.reasoning_parser,
                   "vLLM's parser name: qwen3, deepseek_r1, ... (= --reasoning-format)");
    cmd.add_flag("--enforce-eager", o.enforce_eager, "vLLM's; accepted (no CUDA graphs here)");
    cmd.add_flag("--drop-unsupported-tools", o.http.drop_unsupported_tools,
                 "/v1/responses drops the tool types it cannot run (web_search, ...) instead of "
                 "refusing the request (Codex sends some)");
    cmd.add_option("--kv-cache-dtype", o.kv_cache_dtype,
                   "vLLM's: auto (f16), or fp8 -> q8_0, the 8-bit cache specula has");
    o.parallel_opt =
        cmd.add_option("--parallel", o.service.runtime.n_seqs,
                       "generation slots (default 1: a lone request gets every thread)")
            ->capture_default_str();
    cmd.add_option("--max-num-seqs", o.max_num_seqs,
                   "vLLM's --parallel; without -c, the KV pool as vLLM sizes it "
                   "(--gpu-memory-utilization)");
    cmd.add_option("--dtype", o.dtype, "vLLM's; only auto (the GGUF file's own types)")
        ->capture_default_str();
    cmd.add_flag("--enable-prefix-caching", o.prefix_caching,
                 "vLLM's; on by default (shared prefix blocks, --prefix-min-tokens; a slot "
                 "reuses the longest cached prefix)");
    cmd.add_flag("--no-enable-prefix-caching", o.no_prefix_caching,
                 "vLLM's; no shared prefix blocks (= --prefix-min-tokens 0)");
    cmd.add_flag("--trust-remote-code", o.trust_remote_code, "vLLM's; accepted (no remote code)");
    cmd.add_flag("--disable-log-requests", o.disable_log_requests,
                 "vLLM's; accepted (one log line per request is kept)");
}

// The HTTP side, the memory and threads, the chat template and the connection limits.
void add_serve_http_options(CLI::App& cmd, ServeOptions& o) {
    cmd.add_option("--host", o.http.host, "address to bind (default 127.0.0.1)");
    cmd.add_option("--port", o.http.port, "port (default 8080; 0: any free port)");
    cmd.add_option("--slot-save-path", o.service.slot_save_path,
                   "directory where POST /slots/{id}?action=save|restore keep slot files");
    cmd.add_option("--drain-timeout", o.drain_timeout,
                   "seconds requests in flight may take to finish after SIGTERM / SIGINT "
                   "(default 30; then they are cancelled with an error event)");
    cmd.add_option("--api-key", o.http.api_key, "require Authorization: Bearer KEY on /v1/*");
    cmd.add_option("--cors-origin", o.http.cors_origin,
                   "let browser pages from this origin (or *) call the API (default: none)");
    cmd.add_option("--tensor-parallel-size", o.tensor_parallel,
                   "accepted for vLLM compatibility (warns: the run is on the CPU)");
    cmd.add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                   "vLLM's: the share of the available memory the plan may fill, the KV pool "
                   "taking what the rest leaves (default 0.9; with --max-model-len)");
    cmd.add_option("--cache-ram", o.cache_ram,
                   "host-RAM prompt cache in MiB, counted in the memory plan: finished "
                   "sequences' KV prefixes kept for later prompts that share them (0: off, -1: "
                   "what the plan leaves; default 8192 as llama-server, at most half of the "
                   "memory left)");
    cmd.add_flag("--check-tensors", o.service.runtime.check_tensors,
                 "scan every weight for NaN / infinity at load (llama.cpp's flag)");
    cmd.add_option("--memory-budget", o.service.runtime.memory_budget_mib,
                   "MiB this server plans within when less than MemAvailable (its share of a "
                   "host that runs several; scripts/cluster.sh sets it; default 0: MemAvailable)");
    cmd.add_flag("--no-memory-check{false}", o.service.runtime.memory_check,
                 "start even when the memory plan exceeds the available memory (a warning)");
    cmd.add_option("--cache-type-k", o.cache_type_k, "KV cache type of K: f32, f16 or q8_0 (-ctk)")
        ->capture_default_str();
    cmd.add_option("--cache-type-v", o.cache_type_v, "KV cache type of V: f32, f16 or q8_0 (-ctv)")
        ->capture_default_str();
    cmd.add_option("-t,--threads", o.service.runtime.n_threads,
                   "threads of the one batched pass (default: hardware threads)");
    cmd.add_option("--served-model-name,--alias", o.service.served_name,
                   "model id in the API (default: the file name without .gguf)");
    cmd.add_option("--chat-template", o.service.chat_template,
                   "chatml, llama2, llama3, mistral, gemma, phi3 or plain, or a Jinja template's "
                   "text, instead of the model's tokenizer.chat_template (as llama-server)");
    cmd.add_option("--chat-template-file", o.service.chat_template_file,
                   "Jinja chat template to use instead of the model's tokenizer.chat_template");
    cmd.add_flag("--parse-special-in-content", o.service.parse_special_in_content,
                 "special-token texts in a client's messages and tools become special tokens "
                 "(as llama-server; default: they are text, only the template's markup is "
                 "special)");
    cmd.add_option("--reasoning-budget", o.service.reasoning_budget,
                   "-1: unlimited thinking (default); 0: no thinking (the chat template gets "
                   "enable_thinking: false), as llama-server");
    cmd.add_option("--reasoning-format", o.reasoning_format,
                   "chat: none (thinking stays in content), deepseek (<think> text goes to "
                   "reasoning_content) or auto (deepseek for templates that think)")
        ->capture_default_str();
    cmd.add_option("--tool-call-format", o.tool_call_format,
                   "chat tools: " + tool_call_format_names() +
                       ", or auto (the format the chat template writes)")
        ->capture_default_str();
    cmd.add_option("--max-body-bytes", o.http.max_body_bytes,
                   "largest accepted request body (default 1 MiB)");
    cmd.add_option("--max-connections", o.http.limits.max_connections,
                   "open connections at most; one more is answered 503 (default 256)");
    cmd.add_option("--max-connections-per-client", o.http.limits.max_per_client,
                   "open connections one client address may hold (default half of "
                   "--max-connections; behind a load balancer give it all of them)");
    cmd.add_option("--read-deadline", o.http.limits.read_deadline_s,
                   "seconds a request's line, headers and body may take to arrive (default 10)");
}

}  // namespace

CLI::App* add_serve_command(CLI::App& app) {
    ServeOptions& o = serve_options();
    CLI::App* cmd =
        app.add_subcommand("serve", "OpenAI-compatible HTTP server (speculative decoding)");
    add_serve_model_options(*cmd, o);
    add_serve_request_options(*cmd, o);
    add_serve_http_options(*cmd, o);
    return cmd;
}

int cmd_serve(const Placement& placement, const std::string& repack_cache) {
    ServeOptions& o = serve_options();
    resolve(o);
    o.service.runtime.repack_cache = repack_cache;
    o.service.runtime.gpu = placement.target;
    o.service.runtime.speculative.draft_gpu = placement.draft;
    std::signal(SIGPIPE, SIG_IGN);
    exit_on_stop_signals("serve", "while loading the model");

    Service service(o.service);
    HttpServer server(service, o.http);
    server.bind();
    std::thread http([&server] {
        sigset_t set;  // the signals go to the main thread, never to connection threads
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        server.serve();
    });
    try {
        service.load();
    } catch (...) {
        server.stop();
        http.join();
        throw;
    }
    std::fprintf(stderr, "serve: %s\n", service.describe().c_str());

    std::mutex mu;
    std::condition_variable cv;
    int n_signals = 0;
    forward_stop_signals([&](int sig) {
        const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        std::lock_guard lock(mu);
        if (++n_signals == 1) {
            server.begin_drain();
            std::fprintf(stderr, "serve: %s, draining (up to %g s; again to cut it short)\n", name,
                         o.drain_timeout);
            cv.notify_all();
        } else {
            std::fprintf(stderr, "serve: %s again, cancelling what is in flight\n", name);
            server.hurry();
        }
    });
    server.set_ready();
    {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return n_signals > 0; });
    }
    server.drain(o.drain_timeout);
    http.join();
    return 0;
}

}  // namespace specula::cli
