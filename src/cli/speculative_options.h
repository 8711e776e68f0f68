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

}  // namespace specula::cli
