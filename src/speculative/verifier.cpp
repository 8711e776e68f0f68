// Verifier: see verifier.h.
#include "speculative/verifier.h"

#include <algorithm>

#include "common/error.h"
#include "speculative/categorical.h"

namespace specula {

Verifier::Verifier(int n_vocab, double synthetic_accept, uint64_t synthetic_seed)
    : n_vocab_(n_vocab),
      synthetic_accept_(synthetic_accept),
      synthetic_rng_(synthetic_seed),
      dense_(size_t(n_vocab), 0.f) {
    if (synthetic_accept > 1.0)
        fail("synthetic acceptance must be in [0, 1], got ", synthetic_accept);
    batch_.reserve(64);
    p_.reserve(size_t(n_vocab));
    resid_.reserve(size_t(n_vocab));
}

void Verifier::evaluate(Session& target, token_id last, const Draft& draft) {
    n_past_before_ = target.n_past();
    batch_.clear();
    batch_.push_back(last);
    batch_.insert(batch_.end(), draft.tokens.begin(), draft.tokens.end());
    target.eval(batch_);
}

VerifyResult Verifier::decide(Session& target, const Draft& draft, Sampler& sampler) {
    VerifyResult r;
    if (synthetic())
        r.n_accepted = decide_synthetic(target, draft, sampler, r.next);
    else if (sampler.greedy())
        r.n_accepted = decide_greedy(target, draft, r.next);
    else
        r.n_accepted = decide_sampling(target, draft, sampler, r.next);
    target.rollback(n_past_before_ + 1 + r.n_accepted);
    return r;
}

int Verifier::decide_greedy(const Session& target, const Draft& draft, token_id& next) {
    const int n = draft.size();
    for (int i = 0; i < n; ++i) {
        const token_id t = argmax(target.logits(i), n_vocab_);
        if (t != draft.tokens[i]) {
            next = t;
            return i;
        }
    }
    next = argmax(target.logits(n), n_vocab_);
    return n;
}

int Verifier::decide_sampling(const Session& target, const Draft& draft, Sampler& sampler,
                              token_id& next) {
    const int n = draft.size();
    for (int i = 0; i < n; ++i) {
        const token_id d = draft.tokens[i];
        sampler.distribution(target.logits(i), n_vocab_, p_);
        const float p = prob_of(p_, d);
        const float q = draft.has_q ? prob_of(draft.q[i], d) : 1.f;
        // q(d) > 0 for a token drawn from q; a token outside q (or a one-hot draft) uses q = 1.
        const double ratio = q > 0.f ? double(p) / double(q) : double(p);
        if (p > 0.f && (ratio >= 1.0 || sampler.uniform() < ratio)) continue;
        next = sample_residual(draft, i, sampler);
        return i;
    }
    next = sampler.sample(target.logits(n), n_vocab_);
    return n;
}

// Draws from normalise(max(0, p - q)) at draft position i (p_ holds the target's distribution).
// When the residual is empty (p == q up to rounding) it draws from p itself.
token_id Verifier::sample_residual(const Draft& draft, int i, Sampler& sampler) {
    for (const TokenProb& c : p_) dense_[c.id] = c.p;
    if (draft.has_q) {
        for (const TokenProb& c : draft.q[i])
            if (c.id >= 0 && c.id < n_vocab_) dense_[c.id] -= c.p;
    } else if (draft.tokens[i] >= 0 && draft.tokens[i] < n_vocab_) {
        dense_[draft.tokens[i]] -= 1.f;
    }
    resid_.clear();
    double sum = 0.0;
    for (const TokenProb& c : p_) {
        const float r = dense_[c.id];
        dense_[c.id] = 0.f;
        if (r > 0.f) {
            resid_.push_back({c.id, r});
            sum += r;
        }
    }
    if (draft.has_q)
        for (const TokenProb& c : draft.q[i])
            if (c.id >= 0 && c.id < n_vocab_) dense_[c.id] = 0.f;
    if (!draft.has_q && draft.tokens[i] >= 0 && draft.tokens[i] < n_vocab_)
        dense_[draft.tokens[i]] = 0.f;
    if (sum <= 0.0) return sample_categorical(p_, sampler.uniform());
    return sample_categorical(resid_, sampler.uniform() * sum);
}

int Verifier::decide_synthetic(const Session& target, const Draft& draft, Sampler& sampler,
                               token_id& next) {
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    const int n = draft.size();
    for (int i = 0; i < n; ++i) {
        if (uni(synthetic_rng_) < synthetic_accept_) continue;
        next = sampler.sample(target.logits(i), n_vocab_);
        return i;
    }
    next = sampler.sample(target.logits(n), n_vocab_);
    return n;
}

}  // namespace specula
