// The speculative-decoding options, declared once for every subcommand that decodes (`run`,
// `bench`, `serve`): the same names and aliases everywhere (speculative/config.h lists them).
// cli/llama_flags.h maps llama.cpp's single-dash `-md` to `--model-draft` before parsing.
#pragma once

#include "speculative/config.h"

namespace CLI {
class App;
}

namespace specula::cli {

void add_speculative_options(CLI::App& cmd, SpeculativeFlags& flags);

// parse_speculative_flags(), and one warning when --draft N was given without a drafter (no -md,
// --spec-type or --speculative-config): N does nothing then.
SpeculativeConfig parse_speculative_cli(const SpeculativeFlags& flags, const char* who);

}  // namespace specula::cli
