// Penalizer tests: hand-computed rows for the repetition (divide positive, multiply negative),
// presence and frequency penalties and the logit bias; the last-N window as tokens enter and
// leave it, through push / pop / truncate, against a from-scratch recount on random histories;
// -1 and 0 windows; validation and --logit-bias parsing errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "common/error.h"
#include "sampling/penalties.h"

using namespace specula;

namespace {

const std::vector<float> kRow = {2.0f, -1.0f, 0.5f, 0.0f, -3.0f, 1.0f};

std::vector<float> applied(const Penalizer& p, std::vector<float> row = kRow) {
    p.apply(row.data());
    return row;
}

// The definition written out directly: counts over the last n tokens of `hist`.
std::vector<float> reference(const PenaltyParams& pp, const std::vector<int32_t>& hist,
                             std::vector<float> row) {
    for (const auto& [id, b] : pp.logit_bias) row[size_t(id)] += b;
    if (!pp.penalties_on()) return row;
    const size_t n =
        pp.repeat_last_n < 0 ? hist.size() : std::min(hist.size(), size_t(pp.repeat_last_n));
    std::map<int32_t, int> c;
    for (size_t i = hist.size() - n; i < hist.size(); ++i) ++c[hist[i]];
    for (const auto& [t, k] : c) {
        float& l = row[size_t(t)];
        l = l > 0 ? l / pp.repeat_penalty : l * pp.repeat_penalty;
        l -= pp.presence_penalty + pp.frequency_penalty * float(k);
    }
    return row;
}

}  // namespace

TEST(Penalties, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
    PenaltyParams pp;
    pp.repeat_penalty = 2.0f;
    pp.repeat_last_n = 64;
    Penalizer p(pp, 6);
    p.push(std::vector<int32_t>{0, 1, 3, 0});
    const std::vector<float> want = {1.0f, -2.0f, 0.5f, 0.0f, -3.0f, 1.0f};
    EXPECT_EQ(applied(p), want);
    EXPECT_EQ(p.count(0), 2);
    EXPECT_EQ(p.count(2), 0);
}

TEST(Penalties, PresenceAndFrequency) {
    PenaltyParams pp;
    pp.presence_penalty = 0.5f;
    pp.frequency_penalty = 0.25f;
    Penalizer p(pp, 6);
    p.push(std::vector<int32_t>{5, 5, 5, 2});
    // token 5: 1.0 - 0.5 - 3 * 0.25 = -0.25; token 2: 0.5 - 0.5 - 0.25 = -0.25
    const std::vector<float> want = {2.0f, -1.0f, -0.25f, 0.0f, -3.0f, -0.25f};
    EXPECT_EQ(applied(p), want);
}

TEST(Penalties, AllTogetherWithBiasFirst) {
    PenaltyParams pp;
    pp.repeat_penalty = 1.25f;
    pp.presence_penalty = 0.5f;
    pp.frequency_penalty = 1.0f;
    pp.logit_bias = {{4, -INFINITY}, {1, 3.0f}, {3, 0.5f}, {3, 0.5f}};
    Penalizer p(pp, 6);
    p.push(std::vector<int32_t>{1, 1, 4});
    // 1: (-1 + 3) / 1.25 - 0.5 - 2 = -1.9; 3: bias only, 0 + 1 = 1; 4: banned stays -inf.
    const std::vector<float> got = applied(p);
    EXPECT_FLOAT_EQ(got[1], 2.0f / 1.25f - 2.5f);
    EXPECT_EQ(got[3], 1.0f);
    EXPECT_EQ(got[4], -INFINITY);
    EXPECT_EQ(got[0], 2.0f);
    EXPECT_EQ(got[5], 1.0f);
}

TEST(Penalties, WindowCountsOnlyTheLastNTokens) {
    PenaltyParams pp;
    pp.frequency_penalty = 1.0f;
    pp.repeat_last_n = 3;
    Penalizer p(pp, 6);
    p.push(std::vector<int32_t>{0, 0, 0, 1, 2});  // window: 0 1 2
    EXPECT_EQ(p.count(0), 1);
    EXPECT_EQ(applied(p)[0], 1.0f);
    p.pop();  // window: 0 0 1
    EXPECT_EQ(p.count(0), 2);
    EXPECT_EQ(p.count(2), 0);
    p.truncate(1);  // window: 0
    EXPECT_EQ(p.count(0), 1);
    EXPECT_EQ(p.count(1), 0);
    EXPECT_EQ(p.size(), 1u);
}

TEST(Penalties, OffAndWholeHistory) {
    PenaltyParams off;
    off.repeat_penalty = 3.0f;
    off.repeat_last_n = 0;
    Penalizer p0(off, 6);
    p0.push(std::vector<int32_t>{0, 1});
    EXPECT_FALSE(p0.active());
    EXPECT_EQ(applied(p0), kRow);
    std::vector<float> scratch;
    EXPECT_EQ(p0.apply(kRow.data(), scratch), kRow.data());  // no copy when inactive

    PenaltyParams all;
    all.frequency_penalty = 1.0f;
    all.repeat_last_n = -1;
    Penalizer p1(all, 6);
    for (int i = 0; i < 1000; ++i) p1.push(3);
    EXPECT_EQ(applied(p1)[3], -1000.0f);
    const float* r = p1.apply(kRow.data(), scratch);
    EXPECT_EQ(r, scratch.data());
    EXPECT_EQ(r[3], -1000.0f);
    EXPECT_EQ(kRow[3], 0.0f);  // the const row is untouched
}

TEST(Penalties, IncrementalCountsMatchARecountOnRandomEdits) {
    std::mt19937 rng(7);
    for (int window : {-1, 1, 4, 17}) {
        PenaltyParams pp;
        pp.repeat_penalty = 1.3f;
        pp.presence_penalty = 0.2f;
        pp.frequency_penalty = 0.1f;
        pp.repeat_last_n = window;
        pp.logit_bias = {{2, -1.5f}};
        const int nv = 12;
        Penalizer p(pp, nv);
        std::vector<int32_t> hist;
        std::vector<float> row(nv);
        for (int step = 0; step < 3000; ++step) {
            const int op = int(rng() % 10);
            if (op < 6) {
                const int32_t t = int32_t(rng() % nv);
                p.push(t);
                hist.push_back(t);
            } else if (op < 9) {
                p.pop();
                if (!hist.empty()) hist.pop_back();
            } else {
                const size_t n = hist.empty() ? 0 : rng() % (hist.size() + 1);
                p.truncate(n);
                hist.resize(std::min(hist.size(), n));
            }
            for (int i = 0; i < nv; ++i) row[size_t(i)] = float(int(rng() % 9) - 4) * 0.75f;
            ASSERT_EQ(applied(p, row), reference(pp, hist, row))
                << "window " << window << " step " << step;
        }
    }
}

TEST(Penalties, BadValuesAreNamed) {
    const auto msg = [](PenaltyParams pp) {
        try {
            Penalizer p(pp, 10);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    PenaltyParams a;
    a.repeat_penalty = 0.f;
    EXPECT_NE(msg(a).find("repeat_penalty"), std::string::npos);
    PenaltyParams b;
    b.repeat_last_n = -2;
    EXPECT_NE(msg(b).find("repeat_last_n"), std::string::npos);
    PenaltyParams c;
    c.logit_bias = {{10, 1.f}};
    EXPECT_NE(msg(c).find("token id 10"), std::string::npos);
    PenaltyParams d;
    d.presence_penalty = NAN;
    EXPECT_NE(msg(d).find("presence_penalty"), std::string::npos);
    PenaltyParams e;
    e.logit_bias = {{1, INFINITY}};
    EXPECT_NE(msg(e).find("logit_bias"), std::string::npos);
    Penalizer ok(PenaltyParams{}, 10);
    EXPECT_THROW(ok.push(10), Error);
}

TEST(Penalties, ParseLogitBias) {
    std::vector<std::pair<int32_t, float>> v;
    parse_logit_bias("15043+1", v);
    parse_logit_bias("7-2.5", v);
    parse_logit_bias("3-inf", v);
    ASSERT_EQ(v.size(), 3u);
    EXPECT_EQ(v[0], (std::pair<int32_t, float>{15043, 1.f}));
    EXPECT_EQ(v[1], (std::pair<int32_t, float>{7, -2.5f}));
    EXPECT_EQ(v[2].second, -INFINITY);
    for (const char* bad : {"", "+1", "12", "12*3", "12+", "12+x", "12+1y", "-3+1", "12+-1"}) {
        EXPECT_THROW(parse_logit_bias(bad, v), Error) << bad;
    }
}

TEST(Penalties, ParseLogitBiasJson) {
    using nlohmann::json;
    std::vector<std::pair<int32_t, float>> v;
    parse_logit_bias_json(json::parse(R"({"5": -100, "7": 2.5})"), 10, v);
    parse_logit_bias_json(json::parse(R"([[1, -1.5], [2, false]])"), 10, v);
    parse_logit_bias_json(json(nullptr), 10, v);
    ASSERT_EQ(v.size(), 4u);
    EXPECT_EQ(v[0], (std::pair<int32_t, float>{5, -100.f}));
    EXPECT_EQ(v[1], (std::pair<int32_t, float>{7, 2.5f}));
    EXPECT_EQ(v[2], (std::pair<int32_t, float>{1, -1.5f}));
    EXPECT_EQ(v[3].first, 2);
    EXPECT_EQ(v[3].second, -INFINITY);
    for (const char* bad : {R"({"10": 1})", R"({"x": 1})", R"({"-1": 1})", R"({"1": "a"})",
                            R"([[1]])", R"([[1, true]])", R"(3)", R"({"1 ": 1})"}) {
        try {
            parse_logit_bias_json(json::parse(bad), 10, v);
            ADD_FAILURE() << "accepted " << bad;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("logit_bias"), std::string::npos) << bad;
        }
    }
}
