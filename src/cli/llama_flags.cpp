// normalize_args / add_compat_options / report_compat: see llama_flags.h.
#include "cli/llama_flags.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <map>

#include "cli/cli_util.h"
#include "common/error.h"

namespace specula::cli {

namespace {

// llama.cpp's multi-letter single-dash spellings (and -j, so that its refusal by serve and bench
// names it) and their long forms.
const std::map<std::string, std::string>& long_forms() {
    static const std::map<std::string, std::string> m = {
        {"-md", "--model-draft"},
        {"-td", "--threads-draft"},
        {"-tb", "--threads-batch"},
        {"-tbd", "--threads-batch-draft"},
        {"-cd", "--ctx-size-draft"},
        {"-ngl", "--n-gpu-layers"},
        {"-ngld", "--n-gpu-layers-draft"},
        {"-np", "--parallel"},
        {"-kvu", "--kv-unified"},
        {"-fa", "--flash-attn"},
        {"-ctk", "--cache-type-k"},
        {"-ctv", "--cache-type-v"},
        {"-ctkd", "--cache-type-k-draft"},
        {"-ctvd", "--cache-type-v-draft"},
        {"-sm", "--split-mode"},
        {"-ts", "--tensor-split"},
        {"-mg", "--main-gpu"},
        {"-dev", "--device"},
        {"-devd", "--device-draft"},
        {"-nkvo", "--no-kv-offload"},
        {"-ub", "--ubatch-size"},
        {"-cnv", "--conversation"},
        {"-no-cnv", "--no-conversation"},
        {"-sys", "--system-prompt"},
        {"-mli", "--multiline-input"},
        {"-hf", "--hf-repo"},
        {"-hfr", "--hf-repo"},
        {"-hfd", "--hf-repo-draft"},
        {"-hff", "--hf-file"},
        {"-hft", "--hf-token"},
        {"-mu", "--model-url"},
        {"-sp", "--special"},
        {"-j", "--json-schema"},
        {"-jf", "--json-schema-file"},
        {"-cb", "--cont-batching"},
        {"-nocb", "--no-cont-batching"},
        {"-cv", "--control-vector"},
        {"-dt", "--defrag-thold"},
        {"-nr", "--no-repack"},
        {"-ot", "--override-tensor"},
    };
    return m;
}

// llama.cpp options for features Specula does not have. They change what is generated (or how the
// model is read), so running without them would silently give another result: each is refused.
struct MissingFeature {
    const char* names[9];
    const char* why;
};
const MissingFeature kMissing[] = {
    {{"--mirostat", "--mirostat-lr", "--mirostat-ent", "--dynatemp-range", "--dynatemp-exp"},
     "this sampler is not implemented (specula samples with --temp, --top-k, --top-p, --min-p, "
     "--typical, --top-nsigma, --xtc-*, the penalties and DRY)"},
    {{"--samplers", "--sampling-seq", "--sampler-seq"},
     "the sampler order is fixed (penalties, DRY, top-n-sigma, top-k, typical, top-p, min-p, "
     "XTC, temperature)"},
    {{"--grammar", "--grammar-file"},
     "GBNF grammars are not implemented; -j (--json-schema) constrains the output to JSON"},
    {{"--lora", "--lora-scaled", "--lora-init-without-apply", "--control-vector",
      "--control-vector-scaled", "--control-vector-layer-range"},
     "LoRA adapters and control vectors are not supported"},
    {{"--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale", "--yarn-orig-ctx",
      "--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast"},
     "the RoPE parameters come from the GGUF file and cannot be overridden"},
    {{"--override-kv"}, "the GGUF's metadata and tensors cannot be overridden"},
    {{"--in-prefix", "--in-suffix", "--in-prefix-bos", "--interactive-specials"},
     "llama-cli's raw interactive mode is not supported; use -cnv (a conversation with the "
     "model's chat template) or `specula chat`"},
    {{"--prompt-cache", "--prompt-cache-all", "--prompt-cache-ro", "--binary-file"},
     "not supported (`specula serve` reuses a slot's cached prompt prefix)"},
};

// Features Specula does not have, refused before parsing so that nothing else is reported first.
const char* missing_feature(const std::string& long_form, const std::string& command) {
    const bool conversation_flag =
        long_form == "--conversation" || long_form == "--no-conversation" ||
        long_form == "--system-prompt" || (long_form == "--chat-template" && command != "serve");
    if (conversation_flag && command != "run" && command != "chat")
        return "conversation mode is `specula chat` (or `specula run -cnv`)";
    if ((long_form == "--json-schema" || long_form == "--json-schema-file") && command != "run" &&
        command != "chat")
        return command == "serve" ? "a JSON schema is given per request (response_format, or "
                                    "llama-server's json_schema field)"
                                  : "a JSON schema constrains `specula run` and `specula chat`";
    if (long_form.rfind("--hf-", 0) == 0 || long_form == "--model-url")
        return "specula does not download models; give a local GGUF file with -m";
    if (long_form == "--interactive" || long_form == "-i" || long_form == "--interactive-first")
        return "llama-cli's raw interactive mode is not supported; use -cnv (a conversation "
               "with the model's chat template) or `specula chat`";
    if (long_form == "--multiline-input")
        return "not supported; in conversation mode end a line with \\ to continue it";
    for (const MissingFeature& m : kMissing)
        for (const char* name : m.names)
            if (name != nullptr && long_form == name) return m.why;
    return nullptr;
}

// The options below take a value unless listed here.
bool is_switch(const std::string& name) {
    for (const char* n :
         {"--no-kv-offload", "--mlock", "--no-mmap", "--color", "--no-warmup", "--simple-io",
          "--cont-batching", "--no-cont-batching", "--metrics", "--slots", "--no-slots", "--jinja",
          "--no-webui", "--no-repack", "--verbose-prompt", "--no-perf"})
        if (name == n) return true;
    return false;
}

struct Compat {
    const char* names;  // CLI11 spelling
    const char* why;    // the warning, after "NAME ignored: "
};

const Compat kCompat[] = {
    {"--split-mode", "specula's GPU backend uses one device (--device)"},
    {"--tensor-split", "specula's GPU backend uses one device (--device)"},
    {"--main-gpu", "specula's GPU backend uses one device (--device)"},
    {"--device-draft", "specula's GPU backend uses one device (--device)"},
    {"--no-kv-offload", "specula's GPU backend uses one device (--device)"},
    {"--flash-attn",
     "specula's CPU attention has one form; flash attention is not a separate mode"},
    {"--cache-type-k-draft", "the draft model's KV cache takes the types of -ctk / -ctv"},
    {"--cache-type-v-draft", "the draft model's KV cache takes the types of -ctk / -ctv"},
    {"--threads-draft", "the draft model uses the target's threads (-t)"},
    {"--threads-batch", "prompt processing uses the generation threads (-t)"},
    {"--threads-batch-draft", "prompt processing uses the generation threads (-t)"},
    {"--ctx-size-draft", "the draft model follows the target through its context (-c)"},
    {"--batch-size,-b", "prompts are evaluated in passes of -ub tokens (default 512)"},
    {"--mlock", "the model is memory-mapped; pages are not locked"},
    {"--no-mmap", "the model is always memory-mapped"},
    {"--numa", "threads are not bound to NUMA nodes"},
    {"--keep", "generation stops at a full context (no context shift keeps a prefix)"},
    {"--defrag-thold", "each sequence's KV cache is contiguous (nothing to defragment)"},
    {"--color", "the output is plain text (`specula serve`'s web UI colours drafted tokens)"},
    {"--no-warmup", "there is no warm-up run"},
    {"--simple-io", "the output is always written as plain bytes"},
    {"--no-perf", "the statistics are printed unless -q (--log-disable)"},
    {"--verbose-prompt", "`specula tokenize` prints the prompt's tokens"},
    {"--override-tensor", "tensors are placed by -ngl (layers on the GPU, the rest on the CPU)"},
    {"--no-repack", "quantized weights are repacked where a kernel needs it"},
    {"--cont-batching", "requests are always batched together (server/scheduler)"},
    {"--no-cont-batching", "requests are always batched together (server/scheduler)"},
    {"--metrics", "/metrics is always served"},
    {"--slots", "GET /slots is always served"},
    {"--no-slots", "GET /slots is always served"},
    {"--jinja", "always on: the model's chat template runs in specula's own Jinja engine"},
    {"--no-webui", "the web UI is served at /"},
};

// -xyz: llama.cpp would read one option; CLI11 would split it into -x -y -z.
bool multi_letter_single_dash(const std::string& a) {
    if (a.size() < 3 || a[0] != '-' || a[1] == '-') return false;
    for (size_t i = 1; i < a.size(); ++i)
        if (!std::isalpha(static_cast<unsigned char>(a[i])) && a[i] != '-') return false;
    return true;
}

}  // namespace

// CLI11 never takes a word starting with a dash (other than a negative number) as a value, so
// every such word is an option and can be rewritten without tracking which option it follows.
std::vector<std::string> normalize_args(const std::vector<std::string>& args) {
    std::vector<std::string> out;
    for (size_t i = 1; i < args.size(); ++i) {
        std::string a = args[i];
        if (const auto it = long_forms().find(a); it != long_forms().end())
            a = it->second;
        else if (multi_letter_single_dash(a))
            fail("unknown option ", a, " (run with --help for the options)");
        const std::string name = a.substr(0, a.find('='));
        if (const char* why = missing_feature(name, args.size() > 1 ? args[1] : ""))
            fail(args[i], (args[i] == name ? "" : " (" + name + ")"), ": ", why);
        out.push_back(a);
    }
    return out;
}

void add_compat_options(CLI::App& cmd, CompatFlags& f) {
    for (const Compat& c : kCompat) {
        const std::string names = c.names;
        const std::string first = names.substr(0, names.find(','));
        const std::string help = "ignored (llama.cpp compatibility)";
        CLI::Option* o = is_switch(first) ? cmd.add_flag(names, help) : cmd.add_option(names, help);
        if (first == "--flash-attn") o->expected(0, 1);  // -fa, or -fa on|off|auto
        o->group("llama.cpp options accepted and ignored");
        if (!is_switch(first)) o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        f.options.push_back({o, c.why});
    }
}

void report_compat(const CompatFlags& f) {
    for (const auto& [o, why] : f.options)
        if (o->count() > 0)
            std::fprintf(stderr, "warning: %s ignored: %s\n", o->get_name().c_str(), why);
}

}  // namespace specula::cli
