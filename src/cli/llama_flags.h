// llama.cpp's command-line spellings, in one place for every `specula` command.
//
// llama.cpp writes many options as multi-letter words after ONE dash (-md, -ngl, -cnv, -sys, ...),
// which CLI11 would read as a group of one-letter flags (-cnv -> -c nv). normalize_args() rewrites
// each known word to its long form before parsing, refuses at once a flag for a feature Specula
// does not have (naming it, e.g. -hf: no downloads), and refuses any other multi-letter
// single-dash word as an unknown option (naming it) instead of letting it split.
//
// add_compat_options() declares, on a command, the llama.cpp options Specula accepts but does not
// act on; report_compat() prints one warning line for each one given. Multi-GPU options (-sm,
// -ts, -mg, -devd, -nkvo) warn that the backend uses one device, in every command alike (-ngl,
// -ngld and -dev are real options: cli/gpu_flags.h); -fa (flash
// attention) is accepted as a no-op, as it only changes speed in llama.cpp, and -ctk / -ctv name
// a cache type Specula does not have yet (the KV cache is F32).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace specula::cli {

// args[1..] of main, rewritten as described above; args[0] (the program) is dropped. Throws
// Error naming the flag for an unsupported feature or an unknown multi-letter single-dash word.
std::vector<std::string> normalize_args(const std::vector<std::string>& args);

// The accepted-and-ignored options of one command, each with its warning.
struct CompatFlags {
    std::vector<std::pair<CLI::Option*, const char*>> options;
};

void add_compat_options(CLI::App& cmd, CompatFlags& f);

// One stderr warning per compatibility option given (nothing when none was).
void report_compat(const CompatFlags& f);

}  // namespace specula::cli
