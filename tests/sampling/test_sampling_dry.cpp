// DRY tests: llama.cpp's own worked example (a b c c b c y a b c), the exponent and its clamp, the
// window, breakers that cap a repetition and tokens that are whole breakers; the Z-algorithm
// against a brute-force reading of the definition on random histories with random breakers; the
// breaker tables built from token texts (containing, overlapping, tails) and from a real
// vocabulary; Constraints applying DRY after the penalties, per position as the history grows and
// is rewound; validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "sampling/constraints.h"
#include "sampling/dry.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

using namespace specula;
using specula::test::shared_path;

namespace {

// Tokens 0..n-1 whose texts are `texts`; tokenize() maps each byte to the token of that one byte.
struct ToyVocab {
    std::vector<std::string> texts;
    std::shared_ptr<const DryBreakers> breakers(std::vector<std::string> b) const {
        return std::make_shared<const DryBreakers>(
            b, int(texts.size()), [&](int32_t id) { return texts[size_t(id)]; },
            [&](std::string_view s) {
                std::vector<int32_t> out;
                for (char c : s) {
                    auto it = std::find(texts.begin(), texts.end(), std::string(1, c));
                    out.push_back(it == texts.end() ? -1 : int32_t(it - texts.begin()));
                }
                return out;
            });
    }
};

DryParams params(float mult, float base, int allowed, int last_n = -1) {
    DryParams p;
    p.multiplier = mult;
    p.base = base;
    p.allowed_length = allowed;
    p.penalty_last_n = last_n;
    p.sequence_breakers.clear();
    return p;
}

std::vector<float> penalties(const DryParams& p, const DryBreakers& b,
                             const std::vector<int32_t>& hist, int n_vocab) {
    std::vector<float> row(size_t(n_vocab), 0.f);
    apply_dry(p, b, hist, row.data());
    for (float& v : row) v = -v;
    return row;
}

const DryBreakers& no_breakers() {
    static const DryBreakers b({}, 0, nullptr, nullptr);
    return b;
}

// The definition read literally: the cap from the last breaker, then for every earlier end j the
// longest l <= cap with h[j-l+1..j] == the history's last l tokens; the token after j takes it.
std::map<int32_t, size_t> brute_force(const DryParams& p, const DryBreakers& b,
                                      const std::vector<int32_t>& hist) {
    std::map<int32_t, size_t> longest;
    const size_t n =
        p.penalty_last_n < 0 ? hist.size() : std::min(hist.size(), size_t(p.penalty_last_n));
    if (int(n) <= p.allowed_length) return longest;
    const std::vector<int32_t> w(hist.end() - long(n), hist.end());
    size_t cap = n;
    for (size_t k = 0; k < n; ++k) {  // w[n-1-k] heads a breaker whose tail follows it
        int best = -1;
        for (const auto& tail : b.tails(w[n - 1 - k])) {
            if (tail.size() > k) continue;
            bool ok = true;
            for (size_t o = 0; o < tail.size(); ++o) ok = ok && tail[o] == w[n - k + o];
            if (ok) best = std::max(best, int(tail.size()));
        }
        if (best >= 0) {
            cap = k - size_t(best);
            break;
        }
    }
    if (int(cap) < p.allowed_length) return longest;
    for (size_t j = 0; j + 1 < n; ++j) {
        size_t l = 0;
        while (l <= j && w[j - l] == w[n - 1 - l]) ++l;
        l = std::min(l, cap);
        if (int(l) < p.allowed_length || b.whole(w[j + 1])) continue;
        longest[w[j + 1]] = std::max(longest[w[j + 1]], l);
    }
    return longest;
}

}  // namespace

// llama.cpp's comment on its Z-algorithm: in "a b c c b c y a b c" the last three tokens also end
// at the first c (so the next c would make the repetition 4 long), "b c" ends at the third c
// (then y), "c" alone at the second c (then b).
TEST(Dry, LlamaCppWorkedExample) {
    enum : int32_t { a, b, c, y, other, n_vocab };
    const std::vector<int32_t> hist = {a, b, c, c, b, c, y, a, b, c};
    const auto row = penalties(params(1.0f, 2.0f, 2), no_breakers(), hist, n_vocab);
    EXPECT_FLOAT_EQ(row[c], 2.0f);  // 1 * 2^(3 - 2)
    EXPECT_FLOAT_EQ(row[y], 1.0f);  // 1 * 2^(2 - 2)
    EXPECT_EQ(row[b], 0.f);         // a repetition of 1 < allowed_length
    EXPECT_EQ(row[a], 0.f);
    EXPECT_EQ(row[other], 0.f);
    // allowed_length 1: b is penalised too, and the others by one power more.
    const auto row1 = penalties(params(0.5f, 3.0f, 1), no_breakers(), hist, n_vocab);
    EXPECT_FLOAT_EQ(row1[c], 0.5f * 9.0f);
    EXPECT_FLOAT_EQ(row1[y], 0.5f * 3.0f);
    EXPECT_FLOAT_EQ(row1[b], 0.5f);
}

TEST(Dry, OffShortAndWindowed) {
    enum : int32_t { a, b, c, n_vocab };
    const std::vector<int32_t> hist = {a, b, c, a, b, c, a, b};
    EXPECT_EQ(penalties(params(0.f, 1.75f, 2), no_breakers(), hist, n_vocab),
              std::vector<float>(n_vocab, 0.f));
    EXPECT_EQ(penalties(params(1.f, 1.75f, 2, 0), no_breakers(), hist, n_vocab),
              std::vector<float>(n_vocab, 0.f));
    // "a b" repeats twice before: c follows with a repetition of 5 (a b c a b ... a b).
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 2), no_breakers(), hist, n_vocab)[c], 8.f);
    // The last 4 tokens only (b c a b): "b" ends once before, 1 long, then c.
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 2, 4), no_breakers(), hist, n_vocab)[c], 0.f);
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 1, 4), no_breakers(), hist, n_vocab)[c], 1.f);
    // A window no longer than allowed_length penalises nothing.
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 3, 3), no_breakers(), hist, n_vocab)[c], 0.f);
}

TEST(Dry, ExponentIsClampedBeforeFloatOverflow) {
    std::vector<int32_t> hist(400, 0);  // 0 0 0 ...: the next 0 repeats 399 tokens
    const auto row = penalties(params(1.f, 3.f, 2), no_breakers(), hist, 2);
    // 88.72 / ln 3 = 80.8: 3^80 at most (3^397 would overflow a float).
    EXPECT_FLOAT_EQ(row[0], float(std::pow(3.0, 80)));
    EXPECT_TRUE(std::isfinite(row[0]));
}

TEST(Dry, BreakersCapRepetitionsAndAreNeverPenalised) {
    // 0 "a", 1 "b", 2 "c", 3 "\n", 4 "x:", 5 "d"
    ToyVocab v{{"a", "b", "c", "\n", "x:", "d"}};
    const auto br = v.breakers({"\n", ":"});
    EXPECT_TRUE(br->whole(3));
    EXPECT_TRUE(br->whole(4));
    EXPECT_FALSE(br->whole(0));
    // a b c d \n b c: the stretch "b c" ends at the first c and d followed; the newline three
    // tokens back caps repetitions at 2, which is still allowed_length 2.
    const std::vector<int32_t> hist = {0, 1, 2, 5, 3, 1, 2};
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 2), *br, hist, 6)[5], 1.f);
    // "a b c" followed by d, then "a b c" after a newline: capped at 3 tokens back.
    const std::vector<int32_t> hist2 = {5, 0, 1, 2, 5, 3, 0, 1, 2};
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 2), *br, hist2, 6)[5], 2.f);
    const std::vector<int32_t> hist3 = {5, 0, 1, 2, 5, 0, 3, 1, 2};  // the newline 2 back
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 2), *br, hist3, 6)[5], 1.f);
    const std::vector<int32_t> hist4 = {5, 0, 1, 2, 5, 0, 1, 3, 2};  // 1 back: under allowed
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 2), *br, hist4, 6)[5], 0.f);
    // A repeated newline would extend a repetition but is a breaker itself: never penalised.
    const std::vector<int32_t> hist5 = {0, 1, 3, 0, 1};
    const auto row5 = penalties(params(1.f, 2.f, 2), *br, hist5, 6);
    EXPECT_EQ(row5[3], 0.f);
}

TEST(Dry, BreakerTablesFromTokenTexts) {
    // 0 "x", 1 "a", 2 "ab", 3 "xa", 4 "b", 5 "c", 6 "zab!"
    ToyVocab v{{"x", "a", "ab", "xa", "b", "c", "zab!"}};
    const auto br = v.breakers({"abc"});
    // Tokens ending with a beginning of "abc" need the rest to follow: "a" and "xa" then "b c",
    // "ab" then "c"; "zab!" contains "ab" but does not end with it.
    ASSERT_EQ(br->tails(1).size(), 1u);
    EXPECT_EQ(br->tails(1)[0], (std::vector<int32_t>{4, 5}));
    ASSERT_EQ(br->tails(3).size(), 1u);
    EXPECT_EQ(br->tails(3)[0], (std::vector<int32_t>{4, 5}));
    ASSERT_EQ(br->tails(2).size(), 1u);
    EXPECT_EQ(br->tails(2)[0], (std::vector<int32_t>{5}));
    EXPECT_TRUE(br->tails(6).empty());
    EXPECT_TRUE(br->tails(0).empty());
    EXPECT_FALSE(br->whole(2));
    // A multi-token breaker in the history caps like a one-token one: "ab" then "c" (the head
    // three tokens back) leaves the two tokens after it, "x b"; its first occurrence was
    // followed by c, which would make it 3 long without the breaker.
    const std::vector<int32_t> hist = {5, 0, 4, 5, 0, 2, 5, 0, 4};  // c x b c x ab c x b
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 1), *br, hist, 7)[5], 2.f);
    EXPECT_FLOAT_EQ(penalties(params(1.f, 2.f, 1), no_breakers(), hist, 7)[5], 4.f);
}

TEST(Dry, MatchesTheDefinitionOnRandomHistories) {
    std::mt19937 rng(7);
    ToyVocab v{{"a", "b", "c", "d", "\n", "e:", "f", "g"}};
    const auto br = v.breakers({"\n", ":", "fg"});
    for (int iter = 0; iter < 3000; ++iter) {
        const int alphabet = 2 + int(rng() % 7);
        std::vector<int32_t> hist(rng() % 60);
        for (auto& t : hist) t = int32_t(rng() % unsigned(alphabet));
        DryParams p = params(0.25f + float(rng() % 4), 1.5f, int(rng() % 4),
                             int(rng() % 3 == 0 ? rng() % 40 : -1));
        const DryBreakers& b = iter % 2 ? *br : no_breakers();
        const auto row = penalties(p, b, hist, 8);
        const auto want = brute_force(p, b, hist);
        for (int32_t t = 0; t < 8; ++t) {
            const auto it = want.find(t);
            const float expect =
                it == want.end()
                    ? 0.f
                    : float(double(p.multiplier) *
                            std::pow(double(p.base), int(it->second) - p.allowed_length));
            ASSERT_FLOAT_EQ(row[size_t(t)], expect) << "iteration " << iter << " token " << t;
        }
    }
}

TEST(Dry, BreakersFromARealVocabulary) {
    const auto f = GGUFFile::open(shared_path("vocab/ggml-vocab-llama3.gguf"));
    const auto tok = Tokenizer::from_gguf(*f);
    const std::vector<std::string> defaults = DryParams{}.sequence_breakers;
    const auto br = DryBreakers::from_tokenizer(defaults, *tok);
    for (const char* text : {":", "\n", "\"", "*", "::", ":\n", "\":"}) {
        const auto ids = tok->encode(text, false, false);
        ASSERT_EQ(ids.size(), 1u) << text;
        EXPECT_TRUE(br->whole(ids[0])) << text;
    }
    for (const char* text : {" the", "hello", " cat"}) {
        const auto ids = tok->encode(text, false, false);
        ASSERT_EQ(ids.size(), 1u) << text;
        EXPECT_FALSE(br->whole(ids[0])) << text;
        EXPECT_TRUE(br->tails(ids[0]).empty()) << text;
    }
    // A two-character breaker: tokens that end with its first character carry the second.
    const auto br2 = DryBreakers::from_tokenizer(std::vector<std::string>{"#!"}, *tok);
    const int32_t hash = tok->encode("#", false, false).at(0);
    const int32_t bang = tok->encode("!", false, false).at(0);
    ASSERT_FALSE(br2->tails(hash).empty());
    EXPECT_EQ(br2->tails(hash)[0], std::vector<int32_t>{bang});
}

TEST(Dry, ConstraintsApplyItPerPositionAfterThePenalties) {
    enum : int32_t { a, b, c, n_vocab };
    PenaltyParams pp;
    pp.repeat_penalty = 2.0f;
    pp.repeat_last_n = -1;
    pp.dry = params(1.f, 2.f, 2);
    Constraints cs(pp, n_vocab, nullptr, nullptr, nullptr);  // no breakers: none needed
    cs.push_prompt(std::vector<int32_t>{a, b, c, a});
    std::vector<float> scratch;
    const std::vector<float> row = {4.f, 4.f, 4.f};
    const auto m = cs.mark();
    ASSERT_TRUE(cs.accept(b));  // a b c a b: c would repeat "a b" (2 long): 4 / 2 - 1
    const float* r = cs.apply(row.data(), scratch);
    EXPECT_FLOAT_EQ(r[c], 1.f);
    EXPECT_FLOAT_EQ(r[a], 2.f);
    cs.rewind(m);  // a b c a: b would repeat "a" (1 long): unpenalised by DRY
    r = cs.apply(row.data(), scratch);
    EXPECT_FLOAT_EQ(r[b], 2.f);
    // With breakers asked for, the table is required.
    PenaltyParams with = pp;
    with.dry.sequence_breakers = {"\n"};
    EXPECT_THROW(Constraints(with, n_vocab), Error);
}

TEST(Dry, Validation) {
    const auto bad = [](auto edit) {
        DryParams p;
        p.multiplier = 0.8f;
        edit(p);
        EXPECT_THROW(validate(p), Error);
    };
    bad([](DryParams& p) { p.multiplier = -1.f; });
    bad([](DryParams& p) { p.multiplier = NAN; });
    bad([](DryParams& p) { p.base = 0.5f; });
    bad([](DryParams& p) { p.base = INFINITY; });
    bad([](DryParams& p) { p.allowed_length = -1; });
    bad([](DryParams& p) { p.penalty_last_n = -2; });
    bad([](DryParams& p) { p.sequence_breakers = {""}; });
    DryParams off;
    off.base = 0.f;  // DRY off: llama.cpp takes a base < 1 as off too
    EXPECT_NO_THROW(validate(off));
    try {
        DryParams p;
        p.multiplier = 1.f;
        p.base = 0.5f;
        validate(p);
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("dry_base"), std::string::npos);
    }
}
