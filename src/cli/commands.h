// The `specula` subcommands. main.cpp parses the command line into these option structs and calls
// one cmd_* function; each returns the process exit status and throws specula::Error (printed by
// main as one `error: ...` line) for bad input. stdout carries only the command's output (for
// `run`: the generated text, byte for byte); logs and statistics go to stderr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/load/offload.h"
#include "model/state/session_params.h"
#include "sampling/penalties.h"
#include "speculative/config.h"

namespace CLI {
class App;
}

namespace specula::cli {

// `specula run`: llama-cli style text generation. Defaults are llama.cpp's.
struct RunOptions {
    std::string model;        // -m
    std::string prompt;       // -p
    std::string prompt_file;  // -f (replaces -p)
    int n_predict = -1;       // -n; -1: until end-of-generation or a full context
    int n_threads = 0;        // -t; 0: hardware threads
    int n_ctx = 0;            // -c; 0: the model's training context
    int n_ubatch = SessionParams::kDefaultUbatch;  // -ub (--ubatch-size)
    bool check_tensors = false;                    // --check-tensors
    float temp = 0.8f;
    int top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float typical_p = 1.0f;                              // --typical (1.0: off)
    float top_n_sigma = -1.0f;                           // --top-nsigma (<= 0: off)
    float xtc_probability = 0.0f, xtc_threshold = 0.1f;  // --xtc-probability (0: off)
    uint64_t seed = 0xFFFFFFFFu;  // llama.cpp's LLAMA_DEFAULT_SEED: pick a random seed
    bool ignore_eos = false;
    // --repeat-penalty, --repeat-last-n, --presence-penalty, --frequency-penalty (llama.cpp's
    // defaults: off) and --logit-bias ID(+|-)BIAS, repeatable.
    // --dry-multiplier, --dry-base, --dry-allowed-length, --dry-penalty-last-n go to
    // penalties.dry; --dry-sequence-breaker STRING, repeatable, replaces the default breakers
    // ("none": no breakers).
    PenaltyParams penalties;
    std::vector<std::string> logit_bias;
    std::vector<std::string> dry_breakers;
    // -j (--json-schema) / -jf (--json-schema-file): the output is JSON that the schema admits
    // (the server's response_format subset, sampling/json_grammar.h); "{}" admits any JSON value.
    std::string json_schema;
    std::string json_schema_file;
    bool quiet = false;  // --log-disable: no logs or stats on stderr (errors still print)
    // llama-cli's -e (default on) / --no-escape: escape sequences in the prompt and -r.
    bool escape = true;
    std::vector<std::string> reverse_prompts;  // -r: generation stops once the output has one
    bool special = false;                      // -sp: special tokens print their text
    bool no_display_prompt = false;            // accepted; the prompt is never echoed

    // Conversation mode (-cnv, or `specula chat`): -p / -f is the first user message, then one
    // reply per line typed; the model's chat template (or --chat-template NAME) formats turns.
    bool conversation = false;
    std::string system_prompt;       // -sys
    std::string chat_template;       // --chat-template: a format name or a template text
    std::string chat_template_file;  // --chat-template-file: a Jinja template

    // Speculative decoding (speculative/): a draft model (-md) or n-gram lookup (--spec-type ngram)
    // proposes tokens that the target verifies in one pass; the output is unchanged.
    SpeculativeFlags spec;  // cli/speculative_options.h
    // -ctk / -ctv: the KV cache types (f32, f16, q8_0; llama.cpp's default f16), the draft
    // model's too.
    std::string cache_type_k = "f16";
    std::string cache_type_v = "f16";
    std::string stats_json;    // --stats-json FILE
    Placement placement;       // -ngl / -ngld / --device (cli/gpu_flags.h)
    std::string repack_cache;  // --repack-cache DIR
};

// `specula info FILE`: what the GGUF holds and what running it needs.
struct InfoOptions {
    std::string model;
    bool devices = false;  // --devices: list the Vulkan devices instead
    int n_ctx = 0;         // -c: the context the KV cache size is given for (0: training context)
};

// `specula tokenize`: the tokens of a text, one `id -> 'piece'` line each (llama-tokenize's
// default), or with --ids the ids on one line, space separated (llama-tokenize --ids).
struct TokenizeOptions {
    std::string model;
    std::string prompt;
    std::string prompt_file;
    bool parse_special = true;
    bool ids_only = false;
};

int cmd_run(const RunOptions& opt);
int cmd_chat(const RunOptions& opt);  // cli/cmd_chat.cpp
int cmd_info(const InfoOptions& opt);
int cmd_tokenize(const TokenizeOptions& opt);

// `specula serve`: cli/cmd_serve.cpp declares its options on `app` and runs the server.
CLI::App* add_serve_command(CLI::App& app);
int cmd_serve(const Placement& placement, const std::string& repack_cache);

}  // namespace specula::cli
