// Penalizer: see penalties.h. The window's counts live in a dense per-id array plus a list of the
// ids present, so apply() visits only those ids and push / pop move one token in and at most one
// out of the window.
#include "sampling/penalties.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"

namespace specula {

void validate(const PenaltyParams& p, int n_vocab) {
    if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0.f)
        fail("repeat_penalty ", p.repeat_penalty, " must be a finite number > 0");
    if (p.repeat_last_n < -1)
        fail("repeat_last_n ", p.repeat_last_n, " must be >= -1 (-1: whole context, 0: off)");
    if (!std::isfinite(p.presence_penalty))
        fail("presence_penalty ", p.presence_penalty, " must be a finite number");
    if (!std::isfinite(p.frequency_penalty))
        fail("frequency_penalty ", p.frequency_penalty, " must be a finite number");
    for (const auto& [id, bias] : p.logit_bias) {
        if (id < 0 || id >= n_vocab)
            fail("logit_bias: token id ", id, " is outside the vocabulary [0, ", n_vocab, ")");
        if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity())
            fail("logit_bias: bias ", bias, " of token ", id, " must be a number or -inf");
    }
    validate(p.dry);
}

void parse_logit_bias(std::string_view text, std::vector<std::pair<int32_t, float>>& out) {
    const std::string s(text);
    const auto bad = [&] {
        fail("--logit-bias '", s, "': expected TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1, ",
             "15043-inf)");
    };
    size_t i = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == 0 || i > 9 || i >= s.size() || (s[i] != '+' && s[i] != '-')) bad();
    const int32_t id = int32_t(std::strtol(s.substr(0, i).c_str(), nullptr, 10));
    const std::string num = s.substr(i + 1);
    if (num.empty() || num[0] == '+' || num[0] == '-') bad();
    char* end = nullptr;
    const float v = std::strtof(num.c_str(), &end);
    if (end != num.c_str() + num.size() || std::isnan(v)) bad();
    out.emplace_back(id, s[i] == '-' ? -v : v);
}

void parse_logit_bias_json(const nlohmann::json& v, int n_vocab,
                           std::vector<std::pair<int32_t, float>>& out) {
    const auto id_of = [&](const nlohmann::json& k, const std::string& shown) {
        int64_t id = -1;
        if (k.is_number_integer()) {
            id = k.get<int64_t>();
        } else if (k.is_string()) {
            const std::string& t = k.get_ref<const std::string&>();
            char* end = nullptr;
            id = t.empty() ? -1 : std::strtoll(t.c_str(), &end, 10);
            if (t.empty() || *end != '\0') id = -1;
        }
        if (id < 0 || id >= n_vocab)
            fail("logit_bias: token ", shown, " is not a token id in [0, ", n_vocab, ")");
        return int32_t(id);
    };
    const auto bias_of = [&](const nlohmann::json& b, const std::string& shown) {
        if (b.is_boolean() && !b.get<bool>()) return -std::numeric_limits<float>::infinity();
        if (!b.is_number() || !std::isfinite(b.get<double>()))
            fail("logit_bias: bias of token ", shown, " must be a finite number (or false)");
        return b.get<float>();
    };
    if (v.is_object()) {
        for (const auto& [k, b] : v.items()) {
            const int32_t id = id_of(nlohmann::json(k), k);
            out.emplace_back(id, bias_of(b, k));
        }
    } else if (v.is_array()) {
        for (const nlohmann::json& e : v) {
            if (!e.is_array() || e.size() != 2)
                fail("logit_bias: entry ", e.dump(), " must be [token_id, bias]");
            const int32_t id = id_of(e[0], e[0].dump());
            out.emplace_back(id, bias_of(e[1], e[0].dump()));
        }
    } else if (!v.is_null()) {
        fail("logit_bias must be an object {\"token_id\": bias} or an array [[token_id, bias]]");
    }
}

Penalizer::Penalizer(PenaltyParams params, int n_vocab)
    : params_(std::move(params)), n_vocab_(n_vocab) {
    if (n_vocab <= 0) fail("penalizer: n_vocab ", n_vocab, " must be > 0");
    validate(params_, n_vocab);
    if (params_.penalties_on()) {
        counts_.assign(size_t(n_vocab), 0);
        slot_.assign(size_t(n_vocab), -1);
    }
}

size_t Penalizer::window() const {
    if (!params_.penalties_on()) return 0;
    return params_.repeat_last_n < 0 ? std::numeric_limits<size_t>::max()
                                     : size_t(params_.repeat_last_n);
}

void Penalizer::add(int32_t t) {
    if (counts_[size_t(t)]++ == 0) {
        slot_[size_t(t)] = int32_t(present_.size());
        present_.push_back(t);
    }
}

void Penalizer::remove(int32_t t) {
    if (--counts_[size_t(t)] == 0) {
        const int32_t s = slot_[size_t(t)];
        const int32_t last = present_.back();
        present_[size_t(s)] = last;
        slot_[size_t(last)] = s;
        present_.pop_back();
        slot_[size_t(t)] = -1;
    }
}

void Penalizer::reset() {
    for (int32_t t : present_) counts_[size_t(t)] = 0, slot_[size_t(t)] = -1;
    present_.clear();
    history_.clear();
}

void Penalizer::push(int32_t t) {
    if (t < 0 || t >= n_vocab_) fail("penalizer: token ", t, " outside [0, ", n_vocab_, ")");
    history_.push_back(t);
    const size_t w = window();
    if (w == 0) return;
    add(t);
    if (history_.size() > w) remove(history_[history_.size() - 1 - w]);
}

void Penalizer::push(std::span<const int32_t> tokens) {
    for (int32_t t : tokens) push(t);
}

void Penalizer::pop() {
    if (history_.empty()) return;
    const int32_t t = history_.back();
    history_.pop_back();
    const size_t w = window();
    if (w == 0) return;
    remove(t);
    if (history_.size() >= w) add(history_[history_.size() - w]);
}

void Penalizer::truncate(size_t size) {
    while (history_.size() > size) pop();
}

void Penalizer::apply(float* logits) const {
    for (const auto& [id, bias] : params_.logit_bias) logits[id] += bias;
    if (!params_.penalties_on()) return;
    const float rp = params_.repeat_penalty;
    for (int32_t t : present_) {
        float& l = logits[t];
        const int c = counts_[size_t(t)];
        l = l > 0.f ? l / rp : l * rp;
        l -= params_.presence_penalty + params_.frequency_penalty * float(c);
    }
}

const float* Penalizer::apply(const float* logits, std::vector<float>& scratch) const {
    if (!active()) return logits;
    scratch.assign(logits, logits + n_vocab_);
    apply(scratch.data());
    return scratch.data();
}

}  // namespace specula
