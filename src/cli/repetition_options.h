// llama.cpp's flags for its repetition-breaking samplers in run, chat and serve: DRY's
// (--dry-multiplier, --dry-base, --dry-allowed-length, --dry-penalty-last-n,
// --dry-sequence-breaker; sampling/dry.h) and XTC's (--xtc-probability, --xtc-threshold).
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

// --xtc-probability and --xtc-threshold (sampling/sampler.h's XTC), and their check: both in
// [0, 1], else an `error:` line naming the flag.
void add_xtc_options(CLI::App& cmd, float& probability, float& threshold,
                     const std::string& group = "");
void check_xtc_options(float probability, float threshold);

}  // namespace specula::cli
