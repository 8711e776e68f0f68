// Sampler: llama.cpp's default chain (top-n-sigma -> top-k -> typical -> top-p -> min-p -> XTC ->
// temperature -> draw). Top-n-sigma is a logit floor, applied while the top-k are selected; top-p
// and min-p both keep a prefix of the candidates sorted by logit, so the work is: select the
// top-k (one pass with a small heap), keep the locally typical ones when asked, drop tokens under
// the min-p logit threshold, sort only the part a softmax-mass histogram says top-p can reach, and
// finally take the tempered softmax of the survivors. llama.cpp's LLAMA_DEFAULT_SEED (0xFFFFFFFF)
// asks for a random seed.
#include "sampling/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace specula {

namespace {

constexpr uint64_t kRandomSeed = 0xFFFFFFFFu;

// Candidate order: higher logit first, ties by lower id. (TokenProb::p holds the logit until
// the final softmax. A function object rather than a function so that the sorts inline it.)
struct Better {
    bool operator()(const TokenProb& a, const TokenProb& b) const {
        return a.p > b.p || (a.p == b.p && a.id < b.id);
    }
};
constexpr Better better{};

uint64_t random_seed() {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

void check_logit(float l, int32_t id) {
    if (std::isnan(l)) fail("sampler: logit of token ", id, " is NaN");
}

constexpr float kBanned = -std::numeric_limits<float>::infinity();

// Top-n-sigma's floor: the largest logit less n standard deviations of the row's logits (banned
// ones left out), summed in double in index order; -inf (no floor) when fewer than 4 tokens count
// or they are all equal.
float top_n_sigma_floor(const float* logits, int n, float n_sigma) {
    double sum = 0, sum2 = 0;
    float max = kBanned;
    int count = 0;
    for (int32_t i = 0; i < n; ++i) {
        const float l = logits[i];
        check_logit(l, i);
        if (l == kBanned) continue;
        max = std::max(max, l);
        sum += l;
        sum2 += double(l) * l;
        ++count;
    }
    if (count < 4) return kBanned;
    const double mean = sum / count, var = sum2 / count - mean * mean;
    if (!(var > 0)) return kBanned;
    return static_cast<float>(max - n_sigma * std::sqrt(var));
}

// Fills c with every token, or only the top_k best when 0 < top_k < n (unsorted). The top-k pass
// keeps a heap whose front is the worst kept candidate, so most tokens cost one comparison.
// Banned tokens (logit -inf: a logit bias or a grammar mask) are never candidates, so not even
// the rounding leftover of a draw can pick one; nor are tokens under `floor` (top-n-sigma).
void collect_candidates(const float* logits, int n, int top_k, float floor,
                        std::vector<TokenProb>& c) {
    c.clear();
    if (top_k <= 0 || top_k >= n) {
        c.resize(static_cast<size_t>(n));
        size_t k = 0;
        for (int32_t i = 0; i < n; ++i) {
            check_logit(logits[i], i);
            c[k] = {i, logits[i]};
            k += logits[i] != kBanned && logits[i] >= floor;
        }
        c.resize(k);
        return;
    }
    c.reserve(static_cast<size_t>(top_k));
    for (int32_t i = 0; i < n; ++i) {
        const TokenProb t{i, logits[i]};
        check_logit(t.p, i);
        if (t.p == kBanned || t.p < floor) continue;
        if (c.size() < static_cast<size_t>(top_k)) {
            c.push_back(t);
            std::push_heap(c.begin(), c.end(), better);
        } else if (better(t, c.front())) {
            std::pop_heap(c.begin(), c.end(), better);
            c.back() = t;
            std::push_heap(c.begin(), c.end(), better);
        }
    }
}

// Locally typical sampling over the candidates (their softmax, in double): orders them by
// |-log p - H| (H the entropy; ties: higher logit, then lower id) and keeps the fewest whose mass
// exceeds typical_p, at least one. The order afterwards is unspecified (the caller sorts).
void apply_typical(std::vector<TokenProb>& c, float typical_p) {
    if (typical_p >= 1.f || c.size() <= 1) return;
    float max_logit = kBanned;
    for (const TokenProb& t : c) max_logit = std::max(max_logit, t.p);
    double z = 0;
    for (const TokenProb& t : c) z += std::exp(double(t.p) - max_logit);
    const double log_z = std::log(z);
    double entropy = 0;
    for (const TokenProb& t : c) {
        const double lp = double(t.p) - max_logit - log_z;
        entropy -= std::exp(lp) * lp;
    }
    struct Scored {
        double score, p;
        TokenProb t;
    };
    std::vector<Scored> s;
    s.reserve(c.size());
    for (const TokenProb& t : c) {
        const double lp = double(t.p) - max_logit - log_z;
        s.push_back({std::abs(-lp - entropy), std::exp(lp), t});
    }
    std::sort(s.begin(), s.end(), [](const Scored& a, const Scored& b) {
        return a.score < b.score || (a.score == b.score && better(a.t, b.t));
    });
    double cum = 0;
    size_t keep = s.size();
    for (size_t i = 0; i < s.size(); ++i) {
        cum += s[i].p;
        if (cum > typical_p) {
            keep = i + 1;
            break;
        }
    }
    c.resize(keep);
    for (size_t i = 0; i < keep; ++i) c[i] = s[i].t;
}

// Drops candidates whose probability is below min_p times the largest one; in logit space that
// is logit < max_logit + log(min_p). The best token always stays.
void apply_min_p(std::vector<TokenProb>& c, float max_logit, float min_p) {
    if (min_p <= 0.f) return;
    const float threshold = std::min(max_logit, max_logit + std::log(min_p));
    c.erase(std::remove_if(c.begin(), c.end(), [&](const TokenProb& t) { return t.p < threshold; }),
            c.end());
}

// Softmax mass of the candidates (over the top-k survivors), binned by distance of the logit
// below the maximum. Built in the same pass that computes the normaliser z; it tells top-p how far
// down the nucleus can reach, so only that part of a large vocabulary needs sorting.
class MassHistogram {
  public:
    static constexpr int kBins = 512;
    static constexpr float kSpan = 32.f;  // logits further below the max share the last bin

    explicit MassHistogram(float max_logit) : max_logit_(max_logit) {}

    int bin(float logit) const {
        const float d = (max_logit_ - logit) * (kBins / kSpan);
        return d >= kBins ? kBins : static_cast<int>(d);
    }
    void add(float logit, double mass) { mass_[bin(logit)] += mass; }

    // First bin at which the cumulative mass reaches top_p (kBins if none does).
    int cut_bin(double z, float top_p) const {
        double cum = 0;
        for (int b = 0; b < kBins; ++b) {
            cum += mass_[b] / z;
            if (cum >= top_p) return b;
        }
        return kBins;
    }

  private:
    float max_logit_;
    std::array<double, kBins + 1> mass_{};
};

// Use the histogram only where sorting everything would cost noticeably more.
constexpr size_t kHistogramMinCandidates = 2048;

// Sorts the candidates and keeps the smallest prefix whose probability mass (softmax over the
// top-k survivors: exp(logit - max_logit) / z) reaches top_p. With a histogram, the candidates in
// bins above the cut are sorted and walked first; the rest is sorted only if rounding left the
// walk a hair short of top_p.
void sort_and_apply_top_p(std::vector<TokenProb>& c, float max_logit, double z, float top_p,
                          const MassHistogram* hist) {
    if (top_p >= 1.f) {
        std::sort(c.begin(), c.end(), better);
        return;
    }
    auto sorted_end = c.begin();
    if (hist) {
        const int cut = hist->cut_bin(z, top_p);
        sorted_end = std::partition(c.begin(), c.end(),
                                    [&](const TokenProb& t) { return hist->bin(t.p) <= cut; });
        std::sort(c.begin(), sorted_end, better);
    }
    double cum = 0;
    for (size_t k = 0; k < c.size(); ++k) {
        if (c.begin() + k == sorted_end) {
            std::sort(sorted_end, c.end(), better);
            sorted_end = c.end();
        }
        cum += std::exp(static_cast<double>(c[k].p) - max_logit) / z;
        if (cum >= top_p) {
            c.resize(k + 1);
            return;
        }
    }
}

// XTC's cut on the sorted candidates (logits): how many of the best to remove when its coin comes
// up, i.e. all but the last of those whose softmax probability (temperature 1, as llama.cpp's XTC
// runs before temperature) reaches the threshold; 0 when fewer than two do.
size_t xtc_cut(const std::vector<TokenProb>& c, float threshold) {
    if (threshold > 0.5f || c.size() < 2) return 0;
    double z = 0;
    for (const TokenProb& t : c) z += std::exp(double(t.p) - c[0].p);
    size_t m = 0;
    while (m < c.size() && std::exp(double(c[m].p) - c[0].p) / z >= threshold) ++m;
    return m >= 2 ? m - 1 : 0;
}

// The mixture of keeping the candidates (1 - prob) and removing the first `cut` (prob), on
// tempered probabilities: removing renormalises the rest. Candidates left with p = 0 (prob 1)
// are dropped; the result is sorted by probability again.
void mix_xtc(std::vector<TokenProb>& c, size_t cut, float prob) {
    double rest = 0;
    for (size_t i = cut; i < c.size(); ++i) rest += c[i].p;
    if (!(rest > 0)) return;  // the rest underflowed at a tiny temperature: nothing to move to
    const double keep = 1.0 - double(prob);
    for (size_t i = 0; i < c.size(); ++i)
        c[i].p = float(keep * c[i].p + (i < cut ? 0.0 : double(prob) * c[i].p / rest));
    if (prob >= 1.f) c.erase(c.begin(), c.begin() + long(cut));
    std::stable_sort(c.begin(), c.end(), better);
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
    // The scalar rule (the first i with logits[i] > every logit before it; a NaN never wins, a
    // NaN at 0 keeps 0), found a chunk at a time: each chunk's maximum over independent lanes
    // (a loop the compiler vectorises; `x > m ? x : m` skips NaN as the scalar compare does),
    // and only a chunk that beats the best so far is searched for its first maximal index.
    // Verification takes the argmax of every verified row over the whole vocabulary.
    constexpr int kLanes = 16, kChunk = 1024;
    int32_t best = 0;
    float best_v = logits[0];
    for (int32_t c0 = 0; c0 < n_vocab; c0 += kChunk) {
        const int32_t c1 = std::min<int32_t>(n_vocab, c0 + kChunk);
        float lane[kLanes];
        for (float& m : lane) m = -std::numeric_limits<float>::infinity();
        int32_t i = c0;
        for (; i + kLanes <= c1; i += kLanes) {
            for (int j = 0; j < kLanes; ++j) {
                const float x = logits[i + j];
                lane[j] = x > lane[j] ? x : lane[j];
            }
        }
        float m = lane[0];
        for (int j = 1; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
        for (; i < c1; ++i) m = logits[i] > m ? logits[i] : m;
        if (!(m > best_v)) continue;
        for (i = c0; logits[i] != m; ++i) {
        }
        best = i;
        best_v = m;
    }
    return best;
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), seed_(params.seed == kRandomSeed ? random_seed() : params.seed) {
    if (std::isnan(params.temp) || std::isinf(params.temp)) {
        fail("sampler: temperature ", params.temp, " must be a finite number");
    }
    if (std::isnan(params.top_p)) fail("sampler: top_p is NaN");
    if (std::isnan(params.min_p)) fail("sampler: min_p is NaN");
    if (std::isnan(params.typical_p)) fail("sampler: typical_p is NaN");
    if (!std::isfinite(params.top_n_sigma)) fail("sampler: top_n_sigma must be a finite number");
    if (!(params.xtc_probability >= 0.f && params.xtc_probability <= 1.f))
        fail("sampler: xtc_probability ", params.xtc_probability, " must be in [0, 1]");
    if (!(params.xtc_threshold >= 0.f && params.xtc_threshold <= 1.f))
        fail("sampler: xtc_threshold ", params.xtc_threshold, " must be in [0, 1]");
    rng_.seed(seed_);
}

void Sampler::distribution(const float* logits, int n_vocab, std::vector<TokenProb>& out) const {
    if (n_vocab <= 0) fail("sampler: n_vocab ", n_vocab, " must be > 0");
    out.clear();
    if (greedy()) {
        out.push_back({argmax(logits, n_vocab), 1.0f});
        return;
    }
    const float floor = params_.top_n_sigma > 0.f
                            ? top_n_sigma_floor(logits, n_vocab, params_.top_n_sigma)
                            : kBanned;
    collect_candidates(logits, n_vocab, params_.top_k, floor, out);
    apply_typical(out, params_.typical_p);

    float max_logit = -std::numeric_limits<float>::infinity();
    for (const TokenProb& t : out) max_logit = std::max(max_logit, t.p);
    if (!std::isfinite(max_logit)) {
        fail("sampler: largest logit is ", max_logit, "; need a finite one");
    }
    // Top-p needs the normaliser of the top-k survivors (before min-p removes any).
    const bool top_p_on = params_.top_p < 1.f;
    const bool use_hist = top_p_on && out.size() >= kHistogramMinCandidates;
    MassHistogram hist(max_logit);
    double z = 0;
    for (size_t k = 0; top_p_on && k < out.size(); ++k) {
        const double e = std::exp(static_cast<double>(out[k].p) - max_logit);
        z += e;
        if (use_hist) hist.add(out[k].p, e);
    }

    apply_min_p(out, max_logit, params_.min_p);
    sort_and_apply_top_p(out, max_logit, z, params_.top_p, use_hist ? &hist : nullptr);
    const size_t cut =
        params_.xtc_probability > 0.f ? xtc_cut(out, params_.xtc_threshold) : size_t(0);
    apply_temperature_softmax(out, params_.temp);
    if (cut > 0) mix_xtc(out, cut, params_.xtc_probability);
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
