// Logprobs: see logprobs.h.
#include "server/serving/logprobs.h"

#include <algorithm>
#include <cmath>

namespace specula {

namespace {

using json = nlohmann::json;

constexpr float kFloor = -9999.f;

float clamp_lp(double lp) {
    return std::isfinite(lp) ? std::max(kFloor, float(lp)) : kFloor;
}

std::string piece(const Tokenizer& tok, int32_t id) {
    return tok.token_to_piece(id, /*special=*/false);
}

json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(int(c));
    return b;
}

json chat_entry(const Tokenizer& tok, int32_t id, float lp) {
    const std::string p = piece(tok, id);
    return {{"token", p}, {"logprob", lp}, {"bytes", bytes_of(p)}};
}

}  // namespace

TokenLogprob token_logprob(const float* row, int n_vocab, int32_t id, int n_top, bool with_rank) {
    float m = -INFINITY;
    for (int i = 0; i < n_vocab; ++i) m = std::max(m, row[i]);
    double sum = 0;
    if (std::isfinite(m))
        for (int i = 0; i < n_vocab; ++i) sum += std::exp(double(row[i]) - m);
    const double log_z = double(m) + std::log(sum);
    const auto lp = [&](int32_t t) { return clamp_lp(double(row[t]) - log_z); };

    TokenLogprob out;
    out.id = id;
    out.logprob = lp(id);
    if (with_rank) {
        out.rank = 1;
        for (int i = 0; i < n_vocab; ++i) out.rank += row[i] > row[id];
    }
    if (n_top > 0) {
        std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
        for (int i = 0; i < n_vocab; ++i) ids[size_t(i)] = i;
        const size_t k = std::min<size_t>(size_t(n_top), ids.size());
        std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](int32_t a, int32_t b) {
            return row[a] != row[b] ? row[a] > row[b] : a < b;
        });
        for (size_t i = 0; i < k; ++i) {
            const bool tie = i > 0 && row[ids[i]] == row[ids[i - 1]];
            out.top.push_back({ids[i], lp(ids[i]), tie ? out.top.back().rank : int(i) + 1});
        }
    }
    return out;
}

json prompt_logprobs_json(const std::vector<TokenLogprob>& prompt, int n_top,
                          const Tokenizer& tok) {
    json out = json::array();
    for (size_t i = 0; i < prompt.size(); ++i) {
        if (i == 0) {
            out.push_back(nullptr);
            continue;
        }
        const TokenLogprob& t = prompt[i];
        const auto entry = [&](int32_t id, float lp, int rank) {
            return json{{"logprob", lp},
                        {"rank", rank},
                        {"decoded_token", tok.token_to_piece(id, /*special=*/true)}};
        };
        json e = json::object();
        e[std::to_string(t.id)] = entry(t.id, t.logprob, t.rank);
        const size_t k = std::min(t.top.size(), size_t(std::max(n_top, 0)));
        for (size_t r = 0; r < k; ++r)
            if (t.top[r].id != t.id)
                e[std::to_string(t.top[r].id)] =
                    entry(t.top[r].id, t.top[r].logprob, t.top[r].rank);
        out.push_back(std::move(e));
    }
    return out;
}

std::vector<TokenLogprob> with_top(std::vector<TokenLogprob> tokens, int n_top) {
    for (TokenLogprob& t : tokens)
        if (t.top.size() > size_t(std::max(n_top, 0))) t.top.resize(size_t(std::max(n_top, 0)));
    return tokens;
}

json chat_logprobs_json(const std::vector<TokenLogprob>& tokens, const Tokenizer& tok) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
        json e = chat_entry(tok, t.id, t.logprob);
        json top = json::array();
        for (const TopLogprob& a : t.top) top.push_back(chat_entry(tok, a.id, a.logprob));
        e["top_logprobs"] = top;
        content.push_back(e);
    }
    return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs_json(const std::vector<TokenLogprob>& prompt,
                              const std::vector<TokenLogprob>& tokens, const Tokenizer& tok,
                              size_t offset0) {
    json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
    size_t offset = offset0;
    const auto add = [&](const TokenLogprob& t, bool first_of_prompt) {
        const std::string p = piece(tok, t.id);
        toks.push_back(p);
        offs.push_back(offset);
        offset += p.size();
        if (first_of_prompt) {  // nothing predicts the first prompt token
            lps.push_back(nullptr);
            tops.push_back(nullptr);
            return;
        }
        lps.push_back(t.logprob);
        json top = json::object();
        for (const TopLogprob& a : t.top) {
            const std::string k = piece(tok, a.id);
            if (!top.contains(k)) top[k] = a.logprob;  // pieces may repeat: keep the likeliest
        }
        tops.push_back(top);
    };
    for (size_t i = 0; i < prompt.size(); ++i) add(prompt[i], i == 0);
    for (const TokenLogprob& t : tokens) add(t, false);
    return {
        {"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

}  // namespace specula
