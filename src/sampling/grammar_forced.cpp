// GrammarState::forced_bytes: see grammar_state.h. Kept apart from the matcher (grammar_state.cpp)
// because it only probes it: a byte is forced when it is the one byte step() accepts, apart from
// whitespace between JSON tokens, and the output cannot end here.
#include "sampling/grammar_state.h"

namespace specula {

namespace {

bool is_ws(unsigned c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

}  // namespace

void GrammarState::forced_bytes(std::string& out, size_t max_len) const {
    out.clear();
    GrammarState s(*this), probe(*this), only(*this);
    while (out.size() < max_len && !s.can_end()) {
        int n = 0;
        unsigned pick = 0;
        for (unsigned c = 0; c < 256 && n < 2; ++c) {
            probe = s;
            if (!probe.step(uint8_t(c))) continue;
            if (is_ws(c) && probe.between_tokens()) continue;  // optional whitespace
            if (++n == 1) pick = c, only = probe;
        }
        if (n != 1) return;
        out.push_back(char(pick));
        s = only;
    }
}

}  // namespace specula
