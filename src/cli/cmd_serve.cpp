// `specula serve`: the OpenAI-compatible HTTP server (src/server/). Options follow llama-server
// (-m, -md, --draft, -c, --parallel, --host, --port, --api-key, -t) with vLLM's spellings as
// aliases (--model, --speculative-model, --num-speculative-tokens, --speculative-config,
// --served-model-name). The models are loaded and a draft's vocabulary is checked before the
// port is opened; SIGINT / SIGTERM stop the server cleanly.
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "common/error.h"
#include "kernels/threadpool.h"
#include "server/engine.h"
#include "server/server.h"

namespace specula::cli {

namespace {

struct ServeOptions {
    EngineConfig engine;
    HttpConfig http;
    std::string draft = "4";         // --draft N | auto
    std::string spec_type;           // --spec-type ngram | draft
    std::string speculative_config;  // vLLM's JSON
    bool draft_given = false;
};

ServeOptions g_opt;

// vLLM's --speculative-config '{"method": ..., "model": ..., "num_speculative_tokens": N}'.
void apply_speculative_config(ServeOptions& o) {
    const auto j = nlohmann::json::parse(o.speculative_config, nullptr, false);
    if (!j.is_object())
        fail("--speculative-config must be a JSON object, got: ", o.speculative_config);
    for (const auto& [key, value] : j.items()) {
        if (key == "method") {
            if (!value.is_string()) fail("--speculative-config: 'method' must be a string");
            o.spec_type = value.get<std::string>();
        } else if (key == "model") {
            if (!value.is_string()) fail("--speculative-config: 'model' must be a string");
            o.engine.draft_path = value.get<std::string>();
        } else if (key == "num_speculative_tokens") {
            if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 64)
                fail(
                    "--speculative-config: 'num_speculative_tokens' must be an integer in [0, 64]");
            o.draft = std::to_string(value.get<int>());
        } else {
            fail("--speculative-config: unsupported key '", key,
                 "' (supported: method, model, num_speculative_tokens)");
        }
    }
    if (o.spec_type.empty()) o.spec_type = o.engine.draft_path.empty() ? "" : "draft_model";
}

void resolve(ServeOptions& o) {
    if (!o.speculative_config.empty()) apply_speculative_config(o);
    if (o.spec_type == "draft") o.spec_type = "draft_model";
    if (o.spec_type.empty() && !o.engine.draft_path.empty()) o.spec_type = "draft_model";
    if (!o.spec_type.empty() && o.spec_type != "draft_model" && o.spec_type != "ngram")
        fail(
            "the speculative method (--spec-type or --speculative-config) must be ngram or "
            "draft_model, got '",
            o.spec_type, "'");
    if (o.spec_type == "ngram" && !o.engine.draft_path.empty())
        fail("--spec-type ngram takes no draft model (-md)");
    o.engine.spec_type = o.spec_type;
    if (o.draft == "auto") {
        o.engine.draft_auto = true;
    } else {
        try {
            size_t used = 0;
            o.engine.n_draft = std::stoi(o.draft, &used);
            if (used != o.draft.size()) throw std::invalid_argument("trailing");
        } catch (const std::exception&) {
            fail("--draft must be a number or auto, got '", o.draft, "'");
        }
        if (o.engine.n_draft < 0 || o.engine.n_draft > 64)
            fail("--draft must be in [0, 64] or auto, got ", o.engine.n_draft);
    }
    if (o.http.port < 0 || o.http.port > 65535)
        fail("--port must be in [0, 65535], got ", o.http.port);
    if (o.engine.n_parallel < 1 || o.engine.n_parallel > 256)
        fail("--parallel must be in [1, 256], got ", o.engine.n_parallel);
    if (o.engine.n_ctx < 0) fail("-c (--ctx-size) must be >= 0, got ", o.engine.n_ctx);
    if (o.engine.n_threads < 0) fail("-t (--threads) must be >= 1, got ", o.engine.n_threads);
    if (o.engine.n_threads > max_pool_threads())
        fail("-t (--threads) must be at most ", max_pool_threads(),
             " (4x the hardware threads), got ", o.engine.n_threads);
}

// Stops the server on SIGINT / SIGTERM (delivered to this thread only; see cmd_serve).
void stop_on_signal(HttpServer& server, sigset_t set) {
    std::thread([&server, set] {
        int sig = 0;
        sigwait(&set, &sig);
        std::fprintf(stderr, "serve: signal %d, stopping\n", sig);
        server.stop();
    }).detach();
}

}  // namespace

CLI::App* add_serve_command(CLI::App& app) {
    ServeOptions& o = g_opt;
    CLI::App* cmd =
        app.add_subcommand("serve", "OpenAI-compatible HTTP server (speculative decoding)");
    cmd->add_option("-m,--model", o.engine.model_path, "target GGUF model")->required();
    cmd->add_option("--model-draft,--speculative-model", o.engine.draft_path,
                    "-md: draft GGUF model for speculative decoding");
    cmd->add_option("--draft,--draft-max,--num-speculative-tokens", o.draft,
                    "draft tokens per step, or auto (default 4)");
    cmd->add_option("--spec-type", o.spec_type, "speculative method: draft (with -md) or ngram");
    cmd->add_option("--speculative-config", o.speculative_config,
                    "vLLM style JSON: {\"method\", \"model\", \"num_speculative_tokens\"}");
    cmd->add_option("-c,--ctx-size", o.engine.n_ctx,
                    "context per slot (0: the model's training context, at most 4096)");
    cmd->add_option("--parallel", o.engine.n_parallel,
                    "generation slots (default 1: a lone request gets every thread)")
        ->capture_default_str();
    cmd->add_option("--host", o.http.host, "address to bind (default 127.0.0.1)");
    cmd->add_option("--port", o.http.port, "port (default 8080; 0: any free port)");
    cmd->add_option("--api-key", o.http.api_key, "require Authorization: Bearer KEY on /v1/*");
    cmd->add_option("-t,--threads", o.engine.n_threads,
                    "threads, split among the slots (default: hardware threads)");
    cmd->add_option("--served-model-name,--alias", o.engine.served_name,
                    "model id in the API (default: the file name without .gguf)");
    cmd->add_option("--max-body-bytes", o.http.max_body_bytes,
                    "largest accepted request body (default 1 MiB)");
    return cmd;
}

int cmd_serve() {
    ServeOptions& o = g_opt;
    resolve(o);
    std::signal(SIGPIPE, SIG_IGN);
    // Block SIGINT/SIGTERM before any thread starts, so only the waiting thread receives them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    Engine engine(o.engine);
    std::fprintf(stderr, "serve: %s\n", engine.describe().c_str());
    HttpServer server(engine, o.http);
    stop_on_signal(server, set);
    server.listen();
    return 0;
}

}  // namespace specula::cli
