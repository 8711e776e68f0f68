// Sampler: llama.cpp's default chain (top-k -> top-p -> min-p -> temperature -> draw).
// Top-p and min-p both keep a prefix of the candidates sorted by logit, so the work is: select
// the top-k (nth_element), drop tokens under the min-p logit threshold, then sort only as far as
// top-p needs (growing partial sorts), and finally take the tempered softmax of the survivors.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace specula {

namespace {

constexpr uint64_t kRandomSeed = 0xFFFFFFFFu;

// Candidate order: higher logit first, ties by lower id. (TokenProb::p holds the logit until
// the final softmax.)
bool better(const TokenProb& a, const TokenProb& b) {
    return a.p > b.p || (a.p == b.p && a.id < b.id);
}

uint64_t random_seed() {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// Keeps the k best candidates (unsorted).
void apply_top_k(std::vector<TokenProb>& c, int k) {
    if (k <= 0 || static_cast<size_t>(k) >= c.size()) return;
    std::nth_element(c.begin(), c.begin() + k, c.end(), better);
    c.resize(static_cast<size_t>(k));
}

// Drops candidates whose probability is below min_p times the largest one; in logit space that
// is logit < max_logit + log(min_p). The best token always stays.
void apply_min_p(std::vector<TokenProb>& c, float max_logit, float min_p) {
    if (min_p <= 0.f) return;
    const float threshold = std::min(max_logit, max_logit + std::log(min_p));
    c.erase(std::remove_if(c.begin(), c.end(), [&](const TokenProb& t) { return t.p < threshold; }),
            c.end());
}

// Sorts the candidates and keeps the smallest prefix whose probability mass (softmax over the
// top-k survivors: exp(logit - max_logit) / z) reaches top_p. Sorts in growing chunks so that a
// small nucleus in a large vocabulary costs little more than a selection.
void sort_and_apply_top_p(std::vector<TokenProb>& c, float max_logit, double z, float top_p) {
    if (top_p >= 1.f) {
        std::sort(c.begin(), c.end(), better);
        return;
    }
    double cum = 0;
    size_t done = 0;
    size_t chunk = 64;
    while (done < c.size()) {
        const size_t upto = std::min(c.size(), done + chunk);
        std::partial_sort(c.begin() + done, c.begin() + upto, c.end(), better);
        for (; done < upto; ++done) {
            cum += std::exp(static_cast<double>(c[done].p) - max_logit) / z;
            if (cum >= top_p) {
                c.resize(done + 1);
                return;
            }
        }
        chunk *= 4;
    }
}

// Replaces logits by softmax(logit / temp); the candidates are sorted, so c[0] is the max.
void apply_temperature_softmax(std::vector<TokenProb>& c, float temp) {
    const double max_logit = c[0].p;
    double sum = 0;
    for (TokenProb& t : c) {
        double e = std::exp((t.p - max_logit) / temp);
        t.p = static_cast<float>(e);
        sum += e;
    }
    for (TokenProb& t : c) t.p = static_cast<float>(t.p / sum);
}

}  // namespace

int32_t argmax(const float* logits, int n_vocab) {
    if (n_vocab <= 0) fail("argmax: n_vocab ", n_vocab, " must be > 0");
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; ++i) {
        if (logits[i] > logits[best]) best = i;
    }
    return best;
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), seed_(params.seed == kRandomSeed ? random_seed() : params.seed) {
    rng_.seed(seed_);
}

void Sampler::distribution(const float* logits, int n_vocab, std::vector<TokenProb>& out) const {
    if (n_vocab <= 0) fail("sampler: n_vocab ", n_vocab, " must be > 0");
    out.clear();
    if (greedy()) {
        out.push_back({argmax(logits, n_vocab), 1.0f});
        return;
    }
    out.resize(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) {
        if (std::isnan(logits[i])) fail("sampler: logit of token ", i, " is NaN");
        out[i] = {i, logits[i]};
    }
    apply_top_k(out, params_.top_k);

    float max_logit = -std::numeric_limits<float>::infinity();
    for (const TokenProb& t : out) max_logit = std::max(max_logit, t.p);
    if (!std::isfinite(max_logit)) {
        fail("sampler: largest logit is ", max_logit, "; need a finite one");
    }
    double z = 0;
    for (const TokenProb& t : out) z += std::exp(static_cast<double>(t.p) - max_logit);

    apply_min_p(out, max_logit, params_.min_p);
    sort_and_apply_top_p(out, max_logit, z, params_.top_p);
    apply_temperature_softmax(out, params_.temp);
}

int32_t Sampler::sample(const float* logits, int n_vocab) {
    if (greedy()) return argmax(logits, n_vocab);
    distribution(logits, n_vocab, scratch_);
    const double u = uniform();
    double cum = 0;
    for (const TokenProb& t : scratch_) {
        cum += t.p;
        if (u < cum) return t.id;
    }
    return scratch_.back().id;  // rounding left cum a hair under u
}

double Sampler::uniform() {
    return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

}  // namespace specula
