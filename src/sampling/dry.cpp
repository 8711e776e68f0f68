// DRY: see dry.h. The repetitions come from the Z-function of the reversed window: z[k] is how
// many tokens the stretch ending k tokens before the last one shares with the window's end.
#include "sampling/dry.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace specula {

namespace {

constexpr size_t kMaxBreakerBytes = 40;  // llama.cpp's limits on a breaker and its tail
constexpr size_t kMaxTailTokens = 20;

void add_tail(std::vector<std::vector<int32_t>>& tails, std::vector<int32_t> tail) {
    if (std::find(tails.begin(), tails.end(), tail) == tails.end())
        tails.push_back(std::move(tail));
}

}  // namespace

void validate(const DryParams& p) {
    if (!std::isfinite(p.multiplier) || p.multiplier < 0.f)
        fail("dry_multiplier ", p.multiplier, " must be a finite number >= 0 (0: off)");
    if (!std::isfinite(p.base) || (p.on() && p.base < 1.f))
        fail("dry_base ", p.base, " must be a finite number >= 1");
    if (p.allowed_length < 0) fail("dry_allowed_length ", p.allowed_length, " must be >= 0");
    if (p.penalty_last_n < -1)
        fail("dry_penalty_last_n ", p.penalty_last_n,
             " must be >= -1 (-1: the whole context, 0: off)");
    for (const std::string& b : p.sequence_breakers)
        if (b.empty()) fail("dry_sequence_breakers: a breaker is empty");
}

DryBreakers::DryBreakers(std::span<const std::string> breakers, int n_vocab,
                         const std::function<std::string(int32_t)>& piece,
                         const std::function<std::vector<int32_t>(std::string_view)>& tokenize) {
    if (breakers.empty()) return;
    std::vector<std::string> words(size_t(std::max(n_vocab, 0)));
    for (int32_t id = 0; id < n_vocab; ++id) words[size_t(id)] = piece(id);
    for (const std::string& full : breakers) {
        const std::string s = full.substr(0, kMaxBreakerBytes);
        if (s.empty()) continue;
        // The tokens of s's rest after its first i bytes, computed once per i.
        std::unordered_map<size_t, std::vector<int32_t>> rest;
        for (int32_t id = 0; id < n_vocab; ++id) {
            const std::string& w = words[size_t(id)];
            if (w.find(s) != std::string::npos) {
                add_tail(tails_[id], {});
                continue;
            }
            // A suffix of the token that is a proper beginning of s: the rest must follow.
            for (size_t pos = w.find(s[0]); pos != std::string::npos; pos = w.find(s[0], pos + 1)) {
                const size_t len = w.size() - pos;
                if (len >= s.size() || w.compare(pos, len, s, 0, len) != 0) continue;
                auto it = rest.find(len);
                if (it == rest.end()) {
                    std::vector<int32_t> t = tokenize(std::string_view(s).substr(len));
                    if (t.size() > kMaxTailTokens) t.resize(kMaxTailTokens);
                    it = rest.emplace(len, std::move(t)).first;
                }
                add_tail(tails_[id], it->second);
            }
        }
    }
}

std::shared_ptr<const DryBreakers> DryBreakers::from_tokenizer(
    std::span<const std::string> breakers, const Tokenizer& tok) {
    return std::make_shared<const DryBreakers>(
        breakers, tok.n_vocab(), [&](int32_t id) { return tok.decode({id}, false, true); },
        [&](std::string_view text) { return tok.encode(text, false, false); });
}

std::span<const std::vector<int32_t>> DryBreakers::tails(int32_t token) const {
    const auto it = tails_.find(token);
    if (it == tails_.end()) return {};
    return it->second;
}

bool DryBreakers::whole(int32_t token) const {
    for (const auto& t : tails(token))
        if (t.empty()) return true;
    return false;
}

void apply_dry(const DryParams& p, const DryBreakers& breakers, std::span<const int32_t> history,
               float* logits) {
    if (!p.on()) return;
    const size_t n =
        p.penalty_last_n < 0 ? history.size() : std::min(history.size(), size_t(p.penalty_last_n));
    if (int64_t(n) <= int64_t(p.allowed_length)) return;
    const std::span<const int32_t> w = history.last(n);
    const auto back = [&](size_t k) { return w[n - 1 - k]; };  // k tokens before the last

    // The last breaker in the window caps how far back a repetition may reach: a head token k
    // back whose tail follows it completes a breaker; the longest tail wins.
    size_t rep_limit = n;
    for (size_t k = 0; k < n; ++k) {
        int64_t longest = -1;
        for (const std::vector<int32_t>& tail : breakers.tails(back(k))) {
            const size_t len = tail.size();
            if (int64_t(len) <= longest || len > k) continue;
            bool match = true;
            for (size_t o = 0; o < len && match; ++o) match = tail[o] == back(k - 1 - o);
            if (match) longest = int64_t(len);
        }
        if (longest >= 0) {
            rep_limit = k - size_t(longest);
            break;
        }
    }
    if (int64_t(rep_limit) < int64_t(p.allowed_length)) return;

    // z[k]: the longest L with back(k .. k+L-1) == back(0 .. L-1) (the Z-algorithm).
    std::vector<size_t> z(n, 0);
    for (size_t k = 1, l = 0, r = 0; k < n; ++k) {
        size_t m = k < r ? std::min(r - k, z[k - l]) : 0;
        while (k + m < n && back(m) == back(k + m)) ++m;
        z[k] = m;
        if (k + m > r) l = k, r = k + m;
    }
    // The token after each repeated stretch, with the longest repetition it would extend.
    std::vector<std::pair<int32_t, size_t>> found;
    for (size_t k = 1; k < n; ++k) {
        const size_t len = std::min(z[k], rep_limit);
        if (int64_t(len) >= int64_t(p.allowed_length)) found.emplace_back(back(k - 1), len);
    }
    std::sort(found.begin(), found.end());

    const int max_exponent = p.base > 1.000001f ? int(88.7228391f / std::log(p.base)) : 0;
    for (size_t i = 0; i < found.size(); ++i) {
        if (i + 1 < found.size() && found[i + 1].first == found[i].first) continue;  // not its max
        const int32_t token = found[i].first;
        if (breakers.whole(token)) continue;
        int exponent = int(found[i].second) - p.allowed_length;
        if (max_exponent > 0 && exponent > max_exponent) exponent = max_exponent;
        logits[token] -= float(double(p.multiplier) * std::pow(double(p.base), exponent));
    }
}

}  // namespace specula
