// The draft trace: see draft_trace.h.
#include "speculative/draft_trace.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace specula {

nlohmann::json draft_trace_json(const DraftTraceStep& s, const std::string& drafter) {
    nlohmann::json j = {{"step", s.step},
                        {"pos", s.pos},
                        {"drafter", drafter},
                        {"drafted", s.drafted},
                        {"accepted", s.accepted}};
    if (s.forced > 0) j["forced"] = s.forced;
    return j;
}

nlohmann::json draft_trace_json(const std::vector<DraftTraceStep>& trace,
                                const std::string& drafter) {
    nlohmann::json out = nlohmann::json::array();
    for (const DraftTraceStep& s : trace) out.push_back(draft_trace_json(s, drafter));
    return out;
}

void write_draft_trace(const std::string& path, const std::vector<DraftTraceStep>& trace,
                       const std::string& drafter) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) fail("--draft-trace: cannot write ", path);
    bool ok = true;
    for (const DraftTraceStep& s : trace) {
        const std::string line = draft_trace_json(s, drafter).dump() + "\n";
        ok = ok && std::fwrite(line.data(), 1, line.size(), f) == line.size();
    }
    ok = std::fclose(f) == 0 && ok;
    if (!ok) fail("--draft-trace: error writing ", path);
}

}  // namespace specula
