// llama.cpp's DRY flags (--dry-multiplier, --dry-base, --dry-allowed-length,
// --dry-penalty-last-n, --dry-sequence-breaker) for run, chat and serve (sampling/dry.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "sampling/dry.h"

namespace specula::cli {

// Adds the flags, writing into `dry` and `breakers` (the --dry-sequence-breaker values as given);
// `group`: CLI11's help group ("" for none).
void add_dry_options(CLI::App& cmd, DryParams& dry, std::vector<std::string>& breakers,
                     const std::string& group = "");

// Resolves the breakers given (none given: dry's defaults stay): they replace the defaults, "none"
// empties the list, escapes (\n, \t, ...) are turned into their characters when `escape`. Then
// checks the values: an `error:` line naming the flag (exits) when one is out of range.
void resolve_dry_options(DryParams& dry, const std::vector<std::string>& breakers, bool escape);

}  // namespace specula::cli
