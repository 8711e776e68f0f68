// BatchEvaluator (model/batch_eval.h): one pass over several sessions gives every sequence the
// logits it gets alone, bit for bit: different prompts and lengths, 1..8 sequences, prefill chunks
// mixed with multi-token decode steps, per-session rollback, on a Q8_0 and a K-quant synthetic
// model, an MoE, qwen2, qwen3, qwen3moe and stories260K. Bad batches are refused before any session
// changes.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/threadpool.h"
#include "model/batch_eval.h"
#include "model/session.h"
#include "test_util.h"

namespace {

using specula::BatchEvaluator;
using specula::BatchItem;
using specula::Model;
using specula::Session;
using specula::SessionParams;
using specula::ThreadPool;
using specula::token_id;

// One sequence's schedule: a prompt prefilled in chunks (only the last logits), then decode steps
// of 1..5 tokens (all logits), each followed by a rollback of some of them (a rejected draft).
struct Plan {
    std::vector<std::vector<token_id>> chunks;
    std::vector<bool> all_logits;
    std::vector<int> rollback;  // tokens dropped after each chunk
};

Plan make_plan(int n_vocab, int seed, int n_ctx) {
    std::mt19937 rng(seed);
    Plan p;
    const int prompt = 3 + int(rng() % 40);
    int pos = 0;
    for (int left = prompt; left > 0;) {
        const int n = std::min(left, 1 + int(rng() % 16));
        p.chunks.emplace_back();
        for (int i = 0; i < n; ++i) p.chunks.back().push_back(token_id(rng() % n_vocab));
        p.all_logits.push_back(false);
        p.rollback.push_back(0);
        left -= n;
        pos += n;
    }
    for (int step = 0; step < 8 && pos + 5 < n_ctx; ++step) {
        const int n = 1 + int(rng() % 5);
        p.chunks.emplace_back();
        for (int i = 0; i < n; ++i) p.chunks.back().push_back(token_id(rng() % n_vocab));
        p.all_logits.push_back(true);
        const int drop = int(rng() % n);
        p.rollback.push_back(drop);
        pos += n - drop;
    }
    return p;
}

using Rows = std::vector<std::vector<float>>;  // per chunk: its logits rows

Rows logits_of(const Session& s) {
    const int nv = s.model().hparams().n_vocab;
    Rows r;
    for (int i = 0; i < s.n_logits(); ++i) r.emplace_back(s.logits(i), s.logits(i) + nv);
    return r;
}

std::vector<Rows> run_alone(const Model& m, const Plan& p, int n_ctx) {
    Session s(m, SessionParams{n_ctx, 2});
    std::vector<Rows> out;
    for (size_t c = 0; c < p.chunks.size(); ++c) {
        s.eval(p.chunks[c], p.all_logits[c]);
        out.push_back(logits_of(s));
        s.rollback(s.n_past() - p.rollback[c]);
    }
    return out;
}

// Runs all plans batched: step k evaluates chunk k - start[i] of every plan i that is active, so
// sequences start at different steps and prefill next to others' decode steps.
std::vector<std::vector<Rows>> run_batched(const Model& m, const std::vector<Plan>& plans,
                                           int n_ctx) {
    ThreadPool pool(2);
    BatchEvaluator be(m, pool);
    std::vector<std::unique_ptr<Session>> ss;
    for (size_t i = 0; i < plans.size(); ++i) {
        SessionParams sp{n_ctx, 0};
        sp.pool = &pool;
        ss.push_back(std::make_unique<Session>(m, sp));
    }
    std::vector<std::vector<Rows>> out(plans.size());
    for (int step = 0;; ++step) {
        std::vector<BatchItem> items;
        std::vector<size_t> who;
        for (size_t i = 0; i < plans.size(); ++i) {
            const int c = step - int(i % 3);
            if (c < 0 || c >= int(plans[i].chunks.size())) continue;
            items.push_back({ss[i].get(), plans[i].chunks[size_t(c)], plans[i].all_logits[c]});
            who.push_back(i);
        }
        if (items.empty() && step > 3) break;
        be.eval(items);
        for (size_t k = 0; k < who.size(); ++k) {
            Session& s = *ss[who[k]];
            out[who[k]].push_back(logits_of(s));
            const int c = step - int(who[k] % 3);
            s.rollback(s.n_past() - plans[who[k]].rollback[size_t(c)]);
        }
    }
    return out;
}

// `path` under shared/, or absolute (the repository's tests/data).
void expect_identical(const std::string& stem, const std::string& path) {
    const auto m = Model::load(path.starts_with("/") ? path : specula::test::shared_path(path));
    const int n_ctx = 128;
    for (int n_seq : {1, 2, 3, 5, 8}) {
        std::vector<Plan> plans;
        for (int i = 0; i < n_seq; ++i)
            plans.push_back(make_plan(m->hparams().n_vocab, 100 * n_seq + i, n_ctx));
        const auto batched = run_batched(*m, plans, n_ctx);
        for (int i = 0; i < n_seq; ++i) {
            const auto alone = run_alone(*m, plans[size_t(i)], n_ctx);
            ASSERT_EQ(alone.size(), batched[size_t(i)].size());
            for (size_t c = 0; c < alone.size(); ++c) {
                ASSERT_EQ(alone[c].size(), batched[size_t(i)][c].size());
                for (size_t r = 0; r < alone[c].size(); ++r) {
                    const auto& a = alone[c][r];
                    const auto& b = batched[size_t(i)][c][r];
                    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
                        << stem << ": " << n_seq << " sequences, sequence " << i << ", chunk " << c
                        << ", row " << r << " differs from evaluating it alone";
                }
            }
        }
    }
}

TEST(ModelBatch, Q8_0MatchesAlone) {
    expect_identical("Q8_0", "models/synthetic/rand-llama-tok512-d256-l2-Q8_0.gguf");
}

TEST(ModelBatch, Q4_K_MMatchesAlone) {
    expect_identical("Q4_K_M", "models/synthetic/rand-llama-tok512-d256-l2-Q4_K_M.gguf");
}

TEST(ModelBatch, MoeMatchesAlone) {
    expect_identical("MoE", "models/synthetic/rand-llama-moe4x2-tok512-d256-l2-Q8_0.gguf");
}

TEST(ModelBatch, Qwen2MatchesAlone) {
    expect_identical("qwen2", "models/synthetic/rand-qwen2-tok512-d256-l2-F16.gguf");
}

TEST(ModelBatch, Qwen3MatchesAlone) {
    expect_identical("qwen3", std::string(SPECULA_SOURCE_DIR) +
                                  "/tests/data/arch/rand-qwen3-tok512-d256-l2-Q8_0.gguf");
}

TEST(ModelBatch, Qwen3MoeMatchesAlone) {
    expect_identical("qwen3moe",
                     std::string(SPECULA_SOURCE_DIR) +
                         "/tests/data/arch/rand-qwen3moe-e8x4-tok512-d256-l2-Q8_0.gguf");
}

TEST(ModelBatch, Stories260KMatchesAlone) {
    expect_identical("stories260K", "models/tinystories/stories260K.gguf");
}

TEST(ModelBatch, BadBatchesLeaveSessionsUnchanged) {
    const auto m = Model::load(
        specula::test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-Q8_0.gguf"));
    const auto other = Model::load(
        specula::test::shared_path("models/synthetic/rand-llama-tok512-d256-l1-draft-Q8_0.gguf"));
    ThreadPool pool(2);
    BatchEvaluator be(*m, pool);
    SessionParams sp{16, 0};
    sp.pool = &pool;
    Session a(*m, sp), b(*m, sp), c(*other, sp);
    EXPECT_EQ(a.n_threads(), 2);
    const std::vector<token_id> four{1, 2, 3, 4}, twenty(20, 5), bad{1, 600};
    be.eval(std::vector<BatchItem>{{&a, four, true}, {&b, four, false}});
    ASSERT_EQ(a.n_past(), 4);
    ASSERT_EQ(a.n_logits(), 4);
    ASSERT_EQ(b.n_logits(), 1);
    const std::vector<float> before(a.logits(3), a.logits(3) + m->hparams().n_vocab);
    auto refused = [&](std::vector<BatchItem> items, const std::string& what) {
        try {
            be.eval(items);
            ADD_FAILURE() << "accepted a batch with " << what;
        } catch (const specula::Error& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
        EXPECT_EQ(a.n_past(), 4);
        EXPECT_EQ(b.n_past(), 4);
        ASSERT_EQ(a.n_logits(), 4);
        EXPECT_EQ(0, std::memcmp(before.data(), a.logits(3), before.size() * sizeof(float)));
    };
    refused({{&a, four, true}, {&b, twenty, true}}, "context overflow");
    refused({{&a, four, true}, {&a, four, true}}, "share a session");
    refused({{&a, four, true}, {&b, bad, true}}, "out of range");
    refused({{&a, four, true}, {&c, four, true}}, "another model");
    refused({{&a, four, true}, {nullptr, four, true}}, "no session");
    // An empty item leaves its session alone.
    be.eval(std::vector<BatchItem>{{&a, {}, true}, {&b, four, true}});
    EXPECT_EQ(a.n_past(), 4);
    EXPECT_EQ(a.n_logits(), 0);
    EXPECT_EQ(b.n_past(), 8);
    // Each session records the tokens of its own share of the pass.
    EXPECT_EQ(std::vector<token_id>(a.tokens().begin(), a.tokens().end()), four);
    const std::vector<token_id> eight{1, 2, 3, 4, 1, 2, 3, 4};
    EXPECT_EQ(std::vector<token_id>(b.tokens().begin(), b.tokens().end()), eight);
}

}  // namespace
