// add_dry_options / resolve_dry_options / add_xtc_options / check_xtc_options: see
// repetition_options.h.
#include "cli/repetition_options.h"

#include "cli/cli_util.h"
#include "common/error.h"

namespace specula::cli {

void add_dry_options(CLI::App& cmd, DryParams& dry, std::vector<std::string>& breakers,
                     const std::string& group) {
    cmd.add_option("--dry-multiplier", dry.multiplier,
                   "DRY: penalise tokens that extend a repetition (0.0: off)")
        ->capture_default_str()
        ->group(group);
    cmd.add_option("--dry-base", dry.base, "DRY: the penalty's base, >= 1")
        ->capture_default_str()
        ->group(group);
    cmd.add_option("--dry-allowed-length", dry.allowed_length,
                   "DRY: repetitions up to this long go unpenalised")
        ->capture_default_str()
        ->group(group);
    cmd.add_option("--dry-penalty-last-n", dry.penalty_last_n,
                   "DRY: tokens it looks back over (0: off, -1: the whole context)")
        ->capture_default_str()
        ->group(group);
    cmd.add_option("--dry-sequence-breaker", breakers,
                   "DRY: a text repetitions do not run across; replaces the defaults (\\n : \" "
                   "*); repeatable; \"none\": no breakers")
        ->group(group);
}

void resolve_dry_options(DryParams& dry, const std::vector<std::string>& breakers, bool escape) {
    if (!breakers.empty()) dry.sequence_breakers.clear();
    for (const std::string& b : breakers) {
        if (b == "none") {
            dry.sequence_breakers.clear();
            continue;
        }
        if (b.empty()) fail("--dry-sequence-breaker must not be empty (\"none\": no breakers)");
        dry.sequence_breakers.push_back(escape ? process_escapes(b) : b);
    }
    try {
        validate(dry);
    } catch (const Error& e) {
        // The message starts with the request field's name (dry_base); say the flag instead.
        std::string msg = e.what();
        for (size_t i = 0; i < msg.size() && msg[i] != ' '; ++i)
            if (msg[i] == '_') msg[i] = '-';
        fail("--", msg);
    }
}

void add_xtc_options(CLI::App& cmd, float& probability, float& threshold,
                     const std::string& group) {
    cmd.add_option("--xtc-probability", probability,
                   "XTC: how often the top choices are excluded (0.0: off)")
        ->capture_default_str()
        ->group(group);
    cmd.add_option("--xtc-threshold", threshold,
                   "XTC: the probability a top choice reaches to be excluded (> 0.5: off)")
        ->capture_default_str()
        ->group(group);
}

void check_xtc_options(float probability, float threshold) {
    if (!(probability >= 0.f && probability <= 1.f))
        fail("--xtc-probability must be in [0, 1], got ", probability);
    if (!(threshold >= 0.f && threshold <= 1.f))
        fail("--xtc-threshold must be in [0, 1], got ", threshold);
}

}  // namespace specula::cli
