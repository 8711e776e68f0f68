// Parity with llama.cpp per KV cache type. The reference logits (../shared/reference) were made
// with an F32 cache; its README measures how far an F16 cache moves llama.cpp's own logits (the
// "F16 vs F32 KV cache" column, measured on the d256 ladder files used here), so with an F16 or
// Q8_0 cache every top-10 logit of every prompt position and greedy step, and every logit of the
// full-vocabulary rows, must stay within the weight type's parity tolerance plus that cache
// allowance (scaled for Q8_0's coarser rounding, below), and the top-1 must agree wherever the
// reference's gap exceeds twice the tolerance. The F32 cache is test_model_parity's; TinyStories
// with F16 and Q8_0 caches is test_cli's (llama2.c's golden story with the default F16 cache,
// speculative == plain for each type).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <span>

#include "model/session.h"
#include "test_util.h"

using namespace specula;
using json = nlohmann::json;

namespace {

struct Case {
    std::string stem;
    double weight_tol;  // reference/README.md: suggested parity tolerance of the weight type
    double f16_cache;   // ... and the "F16 vs F32 KV cache" column
};

const Case kCases[] = {
    {"rand-llama-tok512-d256-l2-F32", 1e-4, 0.0045},
    {"rand-llama-tok512-d256-l2-F16", 0.03, 0.034},
    {"rand-llama-tok512-d256-l2-Q8_0", 0.5, 0.45},
    {"rand-llama-tok512-d256-l2-Q4_K_M", 0.5, 0.45},
};

int argmax_of(const float* x, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return best;
}

struct Worst {
    double diff = 0;
    int n_rows = 0, n_top1 = 0;
};

void check_row(const float* ours, int n_vocab, const json& top, double tol,
               const std::string& where, Worst& w) {
    ++w.n_rows;
    for (const auto& e : top) {
        const double d = std::fabs(double(ours[e[0].get<int>()]) - e[1].get<double>());
        w.diff = std::max(w.diff, d);
        ASSERT_LE(d, tol) << where << ", id " << e[0];
    }
    const double gap = top[0][1].get<double>() - top[1][1].get<double>();
    if (gap > 2 * tol) {
        ++w.n_top1;
        ASSERT_EQ(argmax_of(ours, n_vocab), top[0][0].get<int>()) << where;
    }
}

void check(const Case& c, KVType type) {
    const json ref =
        json::parse(test::read_file(test::shared_path("reference/" + c.stem + ".json")));
    ASSERT_EQ(ref["eval"]["kv_cache_type"], "f32");
    const auto model = Model::load(test::shared_path(ref["model"]["path"].get<std::string>()));
    const int n_vocab = model->hparams().n_vocab;
    // Q8_0 rounds each value to a step of up to 1/127 of its block's largest magnitude, 16x the
    // relative step of F16 (2^-11), in K and in V: on top of the F16 tolerance, 32x what an F16
    // cache alone does to exact (F32-weight) logits.
    const double f16_alone = kCases[0].f16_cache;
    const double tol = c.weight_tol + c.f16_cache + (type == KVType::Q8_0 ? 32 * f16_alone : 0);
    Session s(*model, SessionParams{ref["eval"]["n_ctx"].get<int>(), 1, type, type});
    Worst w;
    for (const auto& p : ref["prompts"]) {
        const auto ids = p["token_ids"].get<std::vector<token_id>>();
        s.reset();
        s.eval(ids);
        const std::string name =
            c.stem + " " + kv_type_name(type) + " '" + p["name"].get<std::string>() + "'";
        for (size_t i = 0; i < ids.size(); ++i)
            check_row(s.logits(int(i)), n_vocab, p["prompt_top"][i], tol,
                      name + " position " + std::to_string(i), w);
        const auto g = p["greedy"]["token_ids"].get<std::vector<token_id>>();
        for (size_t i = 0; i < g.size(); ++i) {
            s.eval(std::span<const token_id>(&g[i], 1));
            check_row(s.logits(0), n_vocab, p["greedy"]["steps"][i]["top"], tol,
                      name + " greedy step " + std::to_string(i), w);
        }
    }
    if (ref.contains("full_logits")) {
        for (const auto& fl : ref["full_logits"]) {
            const std::string bin =
                test::read_file(test::shared_path("reference/" + fl["file"].get<std::string>()));
            ASSERT_EQ(bin.size(), sizeof(float) * n_vocab);
            std::vector<float> expect(n_vocab);
            std::memcpy(expect.data(), bin.data(), bin.size());
            std::vector<token_id> ids;
            for (const auto& p : ref["prompts"])
                if (p["name"] == fl["prompt"]) ids = p["token_ids"].get<std::vector<token_id>>();
            const int pos = fl["position"].get<int>();
            s.reset();
            s.eval(std::span<const token_id>(ids.data(), pos + 1), false);
            for (int v = 0; v < n_vocab; ++v)
                ASSERT_LE(std::fabs(double(s.logits(0)[v]) - expect[v]), tol)
                    << fl["file"] << " id " << v;
        }
    }
    EXPECT_GT(w.n_top1, 0) << "no row had a clear top-1";
    std::printf(
        "[kv parity] %s cache %s: %d rows, max |diff| %.3g (tolerance %.3g), %d top-1 checked\n",
        c.stem.c_str(), kv_type_name(type), w.n_rows, w.diff, tol, w.n_top1);
}

}  // namespace

TEST(KVCacheParity, F16CacheMatchesLlamaCpp) {
    for (const Case& c : kCases) check(c, KVType::F16);
}

TEST(KVCacheParity, Q8_0CacheMatchesLlamaCpp) {
    for (const Case& c : kCases) check(c, KVType::Q8_0);
}
