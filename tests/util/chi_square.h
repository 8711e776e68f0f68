// Pearson chi-square of observed counts against exact probabilities, for the sampling tests that
// check speculative decoding keeps the target's distribution.
#pragma once

#include <cmath>
#include <map>

namespace specula::test {

struct ChiSquare {
    double stat = 0, critical = 0;
    int df = 0;
};

// Over the outcomes expected >= 5 times in `trials` draws, the rest (and any outcome of
// probability 0 that was seen) pooled into one bin; critical value at p = 1e-4 (Wilson-Hilferty).
template <class Key>
ChiSquare chi_square(const std::map<Key, double>& p, const std::map<Key, long>& counts,
                     long trials) {
    ChiSquare c;
    double pooled_e = 0, pooled_o = 0;
    int bins = 0;
    for (const auto& [key, prob] : p) {
        const double e = prob * double(trials);
        const auto it = counts.find(key);
        const double o = it == counts.end() ? 0 : double(it->second);
        if (e >= 5) {
            c.stat += (o - e) * (o - e) / e;
            ++bins;
        } else {
            pooled_e += e, pooled_o += o;
        }
    }
    for (const auto& [key, n] : counts)
        if (!p.count(key)) pooled_o += double(n);
    if (pooled_e > 0) {
        c.stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
        ++bins;
    } else if (pooled_o > 0) {
        c.stat = INFINITY;
    }
    c.df = bins - 1;
    const double k = c.df, z = 3.719;
    c.critical = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
    return c;
}

}  // namespace specula::test
