// SpecStats: see stats.h.
#include "speculative/stats.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace specula {

void SpecStats::add(const StepRecord& step) {
    n_generated += int(step.emitted.size());
    n_draft_steps += step.n_draft_steps;
    t_draft_ms += step.draft_ms;
    t_verify_ms += step.verify_ms;
    t_sample_ms += step.sample_ms;
    const int n_draft = step.n_drafted, n_accepted_here = step.n_accepted;
    ++n_target_passes;
    n_forced += step.n_forced;
    n_forced_accepted += step.n_forced_accepted;
    if (n_draft <= 0) return;
    ++n_drafts;
    n_drafted += n_draft;
    n_accepted += n_accepted_here;
    if (int(pos_reached.size()) < n_draft) {
        pos_reached.resize(n_draft, 0);
        pos_accepted.resize(n_draft, 0);
    }
    // Positions 1..n_accepted+1 were checked (the last of them rejected unless all accepted).
    const int checked = std::min(n_draft, n_accepted_here + 1);
    for (int i = 0; i < checked; ++i) ++pos_reached[i];
    for (int i = 0; i < n_accepted_here; ++i) ++pos_accepted[i];
}

double SpecStats::pos_accept_rate(int i) const {
    if (i < 1 || i > int(pos_reached.size()) || pos_reached[i - 1] == 0) return 0;
    return double(pos_accepted[i - 1]) / pos_reached[i - 1];
}

void SpecStats::print(std::FILE* out) const {
    std::fprintf(out,
                 "prompt: %d tokens, %.1f tok/s | generated: %d tokens, %.1f tok/s (stop: %s)\n",
                 n_prompt, prompt_tps(), n_generated, gen_tps(), stop_reason.c_str());
    print_speculative(out);
}

void SpecStats::print_speculative(std::FILE* out) const {
    if (n_forced > 0)
        std::fprintf(out, "grammar-forced drafts: %ld drafted, %ld accepted (%.1f%%)\n", n_forced,
                     n_forced_accepted, 100.0 * double(n_forced_accepted) / double(n_forced));
    if (drafter.empty()) return;
    std::fprintf(out,
                 "speculative%s (%s): %d drafts, %ld drafted, %ld accepted (%.1f%%), %.2f tokens "
                 "per target pass\n",
                 synthetic ? " [SYNTHETIC acceptance]" : "", drafter.c_str(), n_drafts, n_drafted,
                 n_accepted, 100.0 * accept_rate(), mean_accept_len());
    std::fprintf(out, "acceptance by position:");
    for (int i = 1; i <= int(pos_reached.size()); ++i)
        std::fprintf(out, " %d:%.0f%%", i, 100.0 * pos_accept_rate(i));
    std::fprintf(out, "\n");
    std::fprintf(out,
                 "time: draft %.1f ms (%ld steps, %.3f ms/step), verify %.1f ms (%d passes, %.3f "
                 "ms/pass), sampling %.1f ms | cost ratio draft/target %.3f\n",
                 t_draft_ms, n_draft_steps, draft_step_ms(), t_verify_ms, n_target_passes,
                 target_pass_ms(), t_sample_ms, cost_ratio());
}

nlohmann::json SpecStats::to_json() const {
    nlohmann::json pos = nlohmann::json::array();
    for (int i = 1; i <= int(pos_reached.size()); ++i)
        pos.push_back({{"position", i},
                       {"reached", pos_reached[i - 1]},
                       {"accepted", pos_accepted[i - 1]},
                       {"rate", pos_accept_rate(i)}});
    return {
        {"drafter", drafter},
        {"synthetic_acceptance", synthetic},
        {"stop_reason", stop_reason},
        {"prompt", {{"tokens", n_prompt}, {"ms", t_prompt_ms}, {"tokens_per_s", prompt_tps()}}},
        {"generation", {{"tokens", n_generated}, {"ms", t_gen_ms}, {"tokens_per_s", gen_tps()}}},
        {"target_passes", n_target_passes},
        {"drafts", n_drafts},
        {"drafted_tokens", n_drafted},
        {"accepted_tokens", n_accepted},
        {"forced_drafted_tokens", n_forced},
        {"forced_accepted_tokens", n_forced_accepted},
        {"acceptance_rate", accept_rate()},
        {"mean_acceptance_length", mean_accept_len()},
        {"acceptance_by_position", pos},
        {"time_ms", {{"draft", t_draft_ms}, {"verify", t_verify_ms}, {"sampling", t_sample_ms}}},
        {"draft_steps", n_draft_steps},
        {"draft_step_ms", draft_step_ms()},
        {"target_pass_ms", target_pass_ms()},
        {"cost_ratio", cost_ratio()},
    };
}

}  // namespace specula
