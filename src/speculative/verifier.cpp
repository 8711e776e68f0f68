// verify / verify_synthetic: see verifier.h.
#include "speculative/verifier.h"

#include "speculative/drafters/categorical.h"

namespace specula {

namespace {

Verdict recovered(int n_accepted, token_id t) {
    return Verdict{n_accepted, t, false};
}

Verdict bonus(int n_accepted, token_id t) {
    return Verdict{n_accepted, t, true};
}

Verdict verify_greedy(const Draft& draft, const LogitRows& rows) {
    const int n = draft.size();
    for (int i = 0; i < n; ++i) {
        const token_id t = argmax(rows[i], rows.n_vocab);
        if (t != draft.tokens[i]) return recovered(i, t);
    }
    return bonus(n, argmax(rows[n], rows.n_vocab));
}

// Draws from normalise(max(0, p - q)) at draft position i (s.p holds the target's distribution).
// When the residual is empty (p == q up to rounding) it draws from p itself.
token_id sample_residual(const Draft& draft, int i, int n_vocab, Sampler& sampler,
                         VerifyScratch& s) {
    std::vector<float>& dense = s.dense;
    for (const TokenProb& c : s.p) dense[c.id] = c.p;
    if (draft.has_q) {
        for (const TokenProb& c : draft.q[i])
            if (c.id >= 0 && c.id < n_vocab) dense[c.id] -= c.p;
    } else if (draft.tokens[i] >= 0 && draft.tokens[i] < n_vocab) {
        dense[draft.tokens[i]] -= 1.f;
    }
    s.resid.clear();
    double sum = 0.0;
    for (const TokenProb& c : s.p) {
        const float r = dense[c.id];
        dense[c.id] = 0.f;
        if (r > 0.f) {
            s.resid.push_back({c.id, r});
            sum += r;
        }
    }
    if (draft.has_q)
        for (const TokenProb& c : draft.q[i])
            if (c.id >= 0 && c.id < n_vocab) dense[c.id] = 0.f;
    if (!draft.has_q && draft.tokens[i] >= 0 && draft.tokens[i] < n_vocab)
        dense[draft.tokens[i]] = 0.f;
    if (sum <= 0.0) return sample_categorical(s.p, sampler.uniform());
    return sample_categorical(s.resid, sampler.uniform() * sum);
}

Verdict verify_sampling(const Draft& draft, const LogitRows& rows, Sampler& sampler,
                        VerifyScratch& s) {
    const int n = draft.size();
    for (int i = 0; i < n; ++i) {
        const token_id d = draft.tokens[i];
        sampler.distribution(rows[i], rows.n_vocab, s.p);
        const float p = prob_of(s.p, d);
        const float q = draft.has_q ? prob_of(draft.q[i], d) : 1.f;
        // q(d) > 0 for a token drawn from q; a token outside q (or a one-hot draft) uses q = 1.
        const double ratio = q > 0.f ? double(p) / double(q) : double(p);
        if (p > 0.f && (ratio >= 1.0 || sampler.uniform() < ratio)) continue;
        return recovered(i, sample_residual(draft, i, rows.n_vocab, sampler, s));
    }
    return bonus(n, sampler.sample(rows[n], rows.n_vocab));
}

}  // namespace

VerifyScratch::VerifyScratch(int n_vocab) : dense(size_t(n_vocab), 0.f) {
    p.reserve(size_t(n_vocab));
    resid.reserve(size_t(n_vocab));
}

Verdict verify(const Draft& draft, const LogitRows& rows, Sampler& sampler,
               VerifyScratch& scratch) {
    if (sampler.greedy()) return verify_greedy(draft, rows);
    return verify_sampling(draft, rows, sampler, scratch);
}

Verdict verify_synthetic(const Draft& draft, const LogitRows& rows, Sampler& sampler, double accept,
                         std::mt19937_64& rng) {
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    const int n = draft.size();
    for (int i = 0; i < n; ++i) {
        if (uni(rng) < accept) continue;
        return recovered(i, sampler.sample(rows[i], rows.n_vocab));
    }
    return bonus(n, sampler.sample(rows[n], rows.n_vocab));
}

}  // namespace specula
