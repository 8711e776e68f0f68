// NgramDrafter: see ngram_drafter.h.
#include "speculative/drafters/ngram_drafter.h"

#include <algorithm>

#include "common/error.h"

namespace specula {

NgramDrafter::NgramDrafter(const NgramParams& params) : params_(params) {
    if (params.ngram_min < 1 || params.ngram_max < params.ngram_min)
        fail("ngram drafter: need 1 <= ngram_min <= ngram_max, got ngram_min=", params.ngram_min,
             " ngram_max=", params.ngram_max);
}

long NgramDrafter::find_latest(std::span<const token_id> history, int n) {
    const long len = long(history.size());
    const token_id* key = history.data() + len - n;
    // Latest start first; s + n <= len - 1 keeps at least one token after the match.
    for (long s = len - n - 1; s >= 0; --s) {
        if (std::equal(key, key + n, history.data() + s)) return s;
    }
    return -1;
}

std::span<const token_id> NgramDrafter::start(std::span<const token_id> history, int n_max,
                                              Draft& out) {
    out.clear();
    out.has_q = false;
    if (n_max <= 0) return {};
    for (int n = params_.ngram_max; n >= params_.ngram_min; --n) {
        if (long(history.size()) <= n) continue;
        const long s = find_latest(history, n);
        if (s < 0) continue;
        const long from = s + n;
        const long to = std::min<long>(long(history.size()), from + n_max);
        out.tokens.assign(history.begin() + from, history.begin() + to);
        return {};
    }
    return {};
}

}  // namespace specula
