// `specula`: command-line entry point. Parses `run`, `chat`, `info`, `tokenize` and `bench` with
// CLI11 (options named as in llama.cpp's tools) and dispatches to cli/cmd_*.cpp. Every failure,
// whether a bad option or bad input, ends as one `error: ...` line on stderr and exit status 1;
// stdout is left to the command's own output.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/cmd_bench.h"
#include "cli/cmd_bench_serve.h"
#include "cli/cmd_quantize.h"
#include "cli/commands.h"
#include "cli/gpu_flags.h"
#include "cli/llama_flags.h"
#include "cli/repetition_options.h"
#include "cli/speculative_options.h"
#include "common/error.h"
#include "kernels/policy.h"
#include "kernels/table.h"
#ifdef SPECULA_HAVE_VULKAN
#include "vulkan/backend.h"
#endif

#ifndef SPECULA_BUILD_TYPE
#define SPECULA_BUILD_TYPE "unknown"
#endif
#ifndef SPECULA_VERSION
#define SPECULA_VERSION "0.0.0"
#endif

namespace {

using namespace specula::cli;

void print_error(std::string msg) {
    for (char& c : msg) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    while (!msg.empty() && msg.back() == ' ') msg.pop_back();
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", msg.c_str());
}

// `specula --version`: the version, how it was built and the SIMD level its kernels use here.
std::string version_text() {
    std::string s = std::string("specula ") + SPECULA_VERSION + "\nbuild: " + SPECULA_BUILD_TYPE +
                    ", " +
#if defined(__clang__)
                    "clang " + __clang_version__;
#elif defined(__GNUC__)
                    "gcc " + __VERSION__;
#else
                    "unknown compiler";
#endif
    const specula::SimdLevel cpu = specula::cpu_simd_level();
    s += std::string("\nsimd: ") + specula::simd_level_name(specula::active_simd_level()) +
         (specula::amx_active() ? " + amx" : "") + " (this CPU supports " +
         specula::simd_level_name(cpu) + (specula::cpu_has_amx() ? " + amx" : "") + ")";
    return s;
}

// The arguments no option of `cmd` took (`typed`: the command line as normalized, in order): the
// unknown options once each, then the stray values, each in the order typed. Error naming them.
void check_extras(const CLI::App& cmd, const std::vector<std::string>& typed) {
    std::vector<std::string> rest = cmd.remaining();
    if (rest.empty()) return;
    std::string options, values;
    for (const std::string& a : typed) {
        const auto it = std::find(rest.begin(), rest.end(), a);
        if (it == rest.end()) continue;
        rest.erase(it);
        const bool option = a.size() > 1 && a[0] == '-' && !std::isdigit(uint8_t(a[1]));
        std::string& list = option ? options : values;
        if ((", " + list + ", ").find(", " + a + ", ") != std::string::npos) continue;
        list += (list.empty() ? "" : ", ") + a;
    }
    const auto plural = [](const std::string& list) { return list.find(", ") != list.npos; };
    std::string msg = "`specula " + cmd.get_name() + "`: ";
    if (!options.empty())
        msg += (plural(options) ? "unknown options " : "unknown option ") + options;
    if (!values.empty())
        msg += (options.empty() ? "" : "; ") +
               std::string(plural(values) ? "unexpected values " : "unexpected value ") + values;
    specula::fail(msg, " (run `specula ", cmd.get_name(), " --help` for the options)");
}

void add_run_options(CLI::App& cmd, RunOptions& o, std::string& seed) {
    cmd.add_option("-m,--model", o.model, "GGUF model file")->required();
    cmd.add_option("-p,--prompt", o.prompt, "prompt text (default: empty, i.e. BOS only)");
    cmd.add_option("-f,--file", o.prompt_file, "read the prompt from a file");
    cmd.add_option("-n,--n-predict", o.n_predict,
                   "tokens to generate (-1: until end of generation or a full context)")
        ->capture_default_str();
    cmd.add_option("-t,--threads", o.n_threads, "threads (default: hardware threads)");
    cmd.add_option("-c,--ctx-size", o.n_ctx, "context size (0: the model's training context)")
        ->capture_default_str();
    cmd.add_option("--ubatch-size", o.n_ubatch,
                   "the most tokens one pass takes (llama.cpp's -ub): longer prompts go in passes "
                   "of this many")
        ->capture_default_str();
    cmd.add_flag("--check-tensors", o.check_tensors,
                 "scan every weight for NaN / infinity at load (llama.cpp's flag)");
    cmd.add_option("--temp", o.temp, "temperature (<= 0: greedy)")->capture_default_str();
    cmd.add_option("--top-k", o.top_k, "top-k sampling (<= 0: off)")->capture_default_str();
    cmd.add_option("--top-p", o.top_p, "top-p sampling (1.0: off)")->capture_default_str();
    cmd.add_option("--min-p", o.min_p, "min-p sampling (0.0: off)")->capture_default_str();
    cmd.add_option("--typical", o.typical_p, "locally typical sampling, p (1.0: off)")
        ->capture_default_str();
    cmd.add_option("--top-nsigma", o.top_n_sigma,
                   "keep tokens within N standard deviations of the best logit (<= 0: off)")
        ->capture_default_str();
    cmd.add_option("-s,--seed", seed, "RNG seed (-1: random)")->capture_default_str();
    cmd.add_flag("--ignore-eos", o.ignore_eos, "keep generating past end-of-generation tokens");
    specula::PenaltyParams& pen = o.penalties;
    cmd.add_option("--repeat-penalty", pen.repeat_penalty, "penalise repeated tokens (1.0: off)")
        ->capture_default_str();
    cmd.add_option("--repeat-last-n", pen.repeat_last_n,
                   "tokens the penalties look back over (0: off, -1: the whole context)")
        ->capture_default_str();
    cmd.add_option("--presence-penalty", pen.presence_penalty, "presence penalty (0.0: off)")
        ->capture_default_str();
    cmd.add_option("--frequency-penalty", pen.frequency_penalty, "frequency penalty (0.0: off)")
        ->capture_default_str();
    cmd.add_option("--logit-bias", o.logit_bias,
                   "ID(+|-)BIAS, e.g. 15043+1 or 15043-inf (bans it); repeatable");
    add_dry_options(cmd, pen.dry, o.dry_breakers);
    add_xtc_options(cmd, o.xtc_probability, o.xtc_threshold);
    cmd.add_option("-j,--json-schema", o.json_schema,
                   "constrain the output to JSON this schema admits, e.g. '{}' (any JSON value); "
                   "the subset `serve` takes in response_format");
    cmd.add_option("--json-schema-file", o.json_schema_file,
                   "-jf: the same, the schema read from a file");
    cmd.add_flag("-q,--log-disable", o.quiet, "no logs or statistics on stderr");
    add_speculative_options(cmd, o.spec);
    cmd.add_option("--stats-json", o.stats_json, "write the generation statistics to this file");
    cmd.add_option("--cache-type-k", o.cache_type_k, "KV cache type of K: f32, f16 or q8_0 (-ctk)")
        ->capture_default_str();
    cmd.add_option("--cache-type-v", o.cache_type_v, "KV cache type of V: f32, f16 or q8_0 (-ctv)")
        ->capture_default_str();
    cmd.add_flag("-e,--escape,!--no-escape", o.escape,
                 "turn \\n, \\r, \\t, \\', \\\", \\\\ and \\xHH in the prompt and -r into "
                 "their characters (default: on, as llama-cli)");
    cmd.add_option("-r,--reverse-prompt", o.reverse_prompts,
                   "stop generating when the output contains this text (in conversation mode, "
                   "the reply ends there); repeatable");
    cmd.add_flag("--special", o.special, "print special tokens' text, e.g. </s> (-sp)");
    cmd.add_flag("--no-display-prompt", o.no_display_prompt,
                 "accepted for llama-cli's command lines: the prompt is never echoed");
    cmd.add_option("--system-prompt", o.system_prompt,
                   "conversation mode: the system message (-sys)");
    cmd.add_option("--chat-template", o.chat_template,
                   "conversation mode: chatml, llama2, llama3, mistral, gemma, phi3 or plain "
                   "(default: the model's template)");
    cmd.add_option("--chat-template-file", o.chat_template_file,
                   "conversation mode: a Jinja chat template to use instead of the model's");
}

void add_tokenize_options(CLI::App& cmd, TokenizeOptions& o) {
    static bool ignored = false;  // a flag kept only so that llama-tokenize command lines work
    cmd.add_option("-m,--model", o.model, "GGUF file (only its tokenizer is read)")->required();
    cmd.add_option("-p,--prompt", o.prompt, "text to tokenize");
    cmd.add_option("-f,--file", o.prompt_file, "read the text from a file");
    cmd.add_flag("!--no-parse-special", o.parse_special,
                 "treat special-token texts such as <s> as plain text");
    cmd.add_flag("--ids", o.ids_only, "print the ids only, on one line (llama-tokenize --ids)");
    cmd.add_flag("--log-disable", ignored, "accepted for compatibility");
}

// A first word that names no subcommand gets a clearer message than CLI11's.
void check_command(CLI::App& app, const std::string& word) {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        if (sub->get_name() == word) return;
        names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    specula::fail("unknown command '", word, "' (commands: ", names, ")");
}

int run_cli(int argc, char** argv) {
    CLI::App app{
        "specula: LLM inference on the CPU or a Vulkan GPU (GGUF models, llama.cpp compatible)",
        "specula"};
    app.set_version_flag("--version", version_text());
    app.require_subcommand(1);

    RunOptions run_opt;
    std::string seed = "-1";
    CLI::App* run = app.add_subcommand("run", "generate text from a prompt");
    add_run_options(*run, run_opt, seed);
    run->add_flag("--conversation,!--no-conversation", run_opt.conversation,
                  "conversation mode (-cnv), as `specula chat`");

    RunOptions chat_opt;
    std::string chat_seed = "-1";
    CLI::App* chat = app.add_subcommand("chat", "a conversation with the model's chat template");
    add_run_options(*chat, chat_opt, chat_seed);

    InfoOptions info_opt;
    CLI::App* info = app.add_subcommand("info", "describe a GGUF model file");
    info->add_option("file,-m,--model", info_opt.model, "GGUF model file");
    info->add_flag("--devices", info_opt.devices, "list the Vulkan devices with their memory");
    info->add_option("-c,--ctx-size", info_opt.n_ctx,
                     "context for the KV cache size (0: the model's training context)");

    TokenizeOptions tok_opt;
    CLI::App* tokenize = app.add_subcommand("tokenize", "print the token ids of a text");
    add_tokenize_options(*tokenize, tok_opt);

    BenchOptions bench_opt;
    CLI::App* bench = app.add_subcommand("bench", "plain vs speculative decoding benchmark");
    add_bench_options(*bench, bench_opt);

    CLI::App* serve = add_serve_command(app);
    BenchServeOptions bench_serve_opt;
    CLI::App* bench_serve = add_bench_serve_command(app, bench_serve_opt);
    QuantizeCliOptions quantize_opt;
    CLI::App* quantize = add_quantize_command(app, quantize_opt);
    // Each command gets the llama.cpp options it accepts and ignores (cli/llama_flags.h).
    CLI::App* commands[] = {run, chat, info, tokenize, bench, serve};
    std::vector<CompatFlags> compat(std::size(commands));
    for (size_t i = 0; i < compat.size(); ++i) add_compat_options(*commands[i], compat[i]);
    GpuFlags gpu;  // -ngl / -ngld / --device (cli/gpu_flags.h), the same in every command
    for (CLI::App* c : commands) add_gpu_options(*c, gpu);
    std::string repack_cache;  // --repack-cache DIR, the same in every command that loads
    for (CLI::App* c : {run, chat, bench, serve}) {
        c->add_option("--repack-cache", repack_cache,
                      "keep the weights packed at load in a file per model in DIR and map it on "
                      "later loads instead of repacking (as large as the packed matrices)");
    }

    if (argc > 1 && argv[1][0] != '-') check_command(app, argv[1]);
    if (argc > 1 && argv[1][0] == '-' && std::string(argv[1]) != "--help" &&
        std::string(argv[1]) != "-h" && std::string(argv[1]) != "--version") {
        // llama-cli's habit: `specula -m MODEL -p TEXT` means `specula run -m MODEL -p TEXT`.
        specula::fail("no command before '", argv[1], "': give one first, e.g. `specula run ",
                      argv[1], " ...` (as llama-cli) or `specula serve ...` (as llama-server)");
    }
    std::vector<std::string> args = normalize_args(std::vector<std::string>(argv, argv + argc));
    const std::vector<std::string> typed = args;
    std::reverse(args.begin(), args.end());
    // Arguments no option takes are collected, not thrown: the error names them as typed.
    for (CLI::App* c : commands) c->allow_extras();
    bench_serve->allow_extras();
    quantize->allow_extras();
    try {
        app.parse(args);               // CLI11 takes the arguments in reverse order
    } catch (const CLI::Success& e) {  // --help, --version
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        print_error(e.what());
        return 1;
    }
    for (CLI::App* c : {run, chat, info, tokenize, bench, serve, bench_serve, quantize})
        if (c->parsed()) check_extras(*c, typed);

    for (size_t i = 0; i < compat.size(); ++i)
        if (commands[i]->parsed()) report_compat(compat[i]);
    const specula::Placement placement = parse_gpu_flags(gpu);
    run_opt.placement = chat_opt.placement = bench_opt.placement = placement;
    run_opt.repack_cache = chat_opt.repack_cache = bench_opt.repack_cache = repack_cache;
    if (run->parsed()) {
        run_opt.seed = parse_seed(seed, /*allow_random=*/true);
        log_set_enabled(!run_opt.quiet);
        return cmd_run(run_opt);
    }
    if (chat->parsed()) {
        chat_opt.seed = parse_seed(chat_seed, /*allow_random=*/true);
        chat_opt.conversation = true;
        log_set_enabled(!chat_opt.quiet);
        return cmd_chat(chat_opt);
    }
    if (info->parsed()) {
        if (info_opt.devices) return print_devices();
        if (info_opt.model.empty()) specula::fail("info: give a GGUF model file (or --devices)");
        return cmd_info(info_opt);
    }
    if (bench->parsed()) return cmd_bench(bench_opt);
    if (serve->parsed()) return cmd_serve(placement, repack_cache);
    if (bench_serve->parsed()) return cmd_bench_serve(bench_serve_opt);
    if (quantize->parsed()) return cmd_quantize(quantize_opt);
    return cmd_tokenize(tok_opt);
}

}  // namespace

int main(int argc, char** argv) {
    try {
#ifdef SPECULA_HAVE_VULKAN
        specula::vk::register_backend();  // -ngl puts layers on Vulkan (model/load/offload.h's
                                          // seam)
#endif
        return run_cli(argc, argv);
    } catch (const specula::Error& e) {
        print_error(e.what());
    } catch (const std::bad_alloc&) {
        print_error("out of memory");
    } catch (const std::exception& e) {
        print_error(e.what());
    } catch (...) {
        print_error("unknown failure");
    }
    return 1;
}
