// gather_captured_features: see captured_features.h.
#include "speculative/drafters/captured_features.h"

#include <algorithm>
#include <cstring>

#include "model/session.h"

namespace specula {

void gather_captured_features(const Session& target, int last, int pos, int L,
                              std::span<const int> column, int target_embd,
                              std::vector<float>& out) {
    const int n = std::max(L - pos, 0);
    const size_t td = size_t(target_embd), w = td * column.size();
    out.resize(w * size_t(n));
    for (int i = 0; i < n; ++i) {
        const float* row = target.captured(last - (L - 1 - (pos + i)));
        for (size_t k = 0; k < column.size(); ++k) {
            std::memcpy(out.data() + w * size_t(i) + td * k, row + td * size_t(column[k]),
                        sizeof(float) * td);
        }
    }
}

}  // namespace specula
