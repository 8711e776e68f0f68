// gemma3 and gemma2 beyond parity (test_model_parity_arch checks the logits against
// ik_llama.cpp): the hyperparameters the files imply (which layers slide, rope bases, scales,
// soft-caps), a pass over b tokens gives bit-identical logits to b one-token passes across the
// sliding window's edge, the sliding-window layers' ring caches give the same logits as whole
// ones (and rollback across their edge works), and files whose metadata contradicts their tensors
// fail to load with an Error naming the key or tensor and the file. Uses the small files of
// tests/data/arch and modified copies of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/batch_eval.h"
#include "model/memory_plan.h"
#include "model/session.h"
#include "test_util.h"

namespace {

using namespace specula::test;

using specula::Model;
using specula::Session;
using specula::SessionParams;
using specula::token_id;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kGemma3 = kDir + "rand-gemma3-tok512-d128-l7-F16.gguf";
const std::string kGemma3Draft = kDir + "rand-gemma3-tok512-d128-l6-draft-Q8_0.gguf";
const std::string kGemma2 = kDir + "rand-gemma2-tok512-d32-l26-F16.gguf";

TEST(Gemma, BatchOfTokensEqualsOneAtATime) {
    // 48 tokens: three times the window of 16, so passes start before, at and after its edge.
    for (const std::string& path : {kGemma3, kGemma2})
        expect_batch_invariant(path, random_tokens(48, 11), {{9}, {5, 1, 3}, {16, 2}, {17}});
}

TEST(Gemma3, HyperparametersAsWritten) {
    const auto m = Model::load(kGemma3);
    const auto& hp = m->hparams();
    EXPECT_EQ(hp.arch, "gemma3");
    EXPECT_EQ(hp.head_dim, 48);  // attention.key_length: wider than n_embd / n_head = 32
    EXPECT_TRUE(hp.rope_neox);
    EXPECT_EQ(hp.n_swa, 16);
    // Five sliding-window layers, then a global one.
    for (int il = 0; il < hp.n_layer; ++il) EXPECT_EQ(hp.is_swa(il), il != 5) << il;
    EXPECT_EQ(hp.window(5), 0);
    EXPECT_EQ(hp.window(6), 16);
    EXPECT_FLOAT_EQ(hp.rope_freq_base, 1e6f);
    EXPECT_FLOAT_EQ(hp.rope_freq_scale, 0.5f);  // linear scaling x2: global layers only
    EXPECT_FLOAT_EQ(hp.rope_freq_base_swa, 10000.f);
    EXPECT_FLOAT_EQ(hp.rope_freq_scale_swa, 1.f);
    EXPECT_FLOAT_EQ(hp.attn_scale, 1.f / std::sqrt(48.f));
    EXPECT_FLOAT_EQ(hp.embd_scale, std::sqrt(128.f));
    EXPECT_EQ(hp.attn_softcap, 0.f);
    EXPECT_EQ(hp.final_softcap, 0.f);
    EXPECT_TRUE(hp.ffn_act == specula::HParams::FfnAct::GeluTanh);
    // Tied output, post-norms and Q/K norms bound.
    EXPECT_EQ(m->output.data, m->tok_embd.data);
    for (const auto& l : m->layers) {
        EXPECT_NE(l.attn_post_norm, nullptr);
        EXPECT_NE(l.ffn_post_norm, nullptr);
        EXPECT_NE(l.q_norm, nullptr);
    }
}

TEST(Gemma2, HyperparametersAsWritten) {
    const auto m = Model::load(kGemma2);
    const auto& hp = m->hparams();
    EXPECT_EQ(hp.arch, "gemma2");
    EXPECT_EQ(hp.n_swa, 16);
    for (int il = 0; il < hp.n_layer; ++il) EXPECT_EQ(hp.is_swa(il), il % 2 == 0) << il;
    EXPECT_FLOAT_EQ(hp.rope_freq_base_swa, hp.rope_freq_base);  // one rope for every layer
    EXPECT_FLOAT_EQ(hp.attn_softcap, 5.f);
    EXPECT_FLOAT_EQ(hp.final_softcap, 15.f);
    EXPECT_FLOAT_EQ(hp.attn_scale, 1.f / std::sqrt(16.f));
    EXPECT_EQ(m->layers[0].q_norm, nullptr);
}

// Gemma2's final soft-cap bounds every logit.
TEST(Gemma2, LogitsAreSoftCapped) {
    const auto m = Model::load(kGemma2);
    Session s(*m, SessionParams{64, 1});
    const auto ids = random_tokens(20, 5);
    s.eval(ids);
    float mx = 0;
    for (int r = 0; r < s.n_logits(); ++r)
        for (int i = 0; i < m->hparams().n_vocab; ++i) mx = std::max(mx, std::fabs(s.logits(r)[i]));
    EXPECT_LT(mx, 15.f);
    EXPECT_GT(mx, 5.f);
}

// ---------------------------------------------------------------------------------------------
// The sliding-window layers' ring caches (model/state/kv_cache.h).

SessionParams ring_params(int max_pass, specula::KVType type = specula::KVType::F32) {
    SessionParams sp{128, 1};
    sp.swa_max_pass = max_pass;
    sp.type_k = sp.type_v = type;
    return sp;
}

// Logits of every position of `ids` in passes of `sizes` on a session made with `sp`.
std::vector<float> run_params(const Model& m, const std::vector<token_id>& ids,
                              const std::vector<int>& sizes, const SessionParams& sp) {
    Session s(m, sp);
    const int nv = m.hparams().n_vocab;
    std::vector<float> out;
    for (size_t at = 0, i = 0; at < ids.size(); ++i) {
        const int n = std::min<int>(sizes[i % sizes.size()], int(ids.size() - at));
        s.eval(std::span<const token_id>(ids.data() + at, n));
        EXPECT_EQ(s.n_logits(), n);
        for (int r = 0; r < n; ++r) out.insert(out.end(), s.logits(r), s.logits(r) + nv);
        at += n;
    }
    return out;
}

// Sliding-window layers keep window - 1 + swa_max_pass rows; the logits are bit-identical to a
// cache of the whole context (F32 and F16), for passes shorter and longer than swa_max_pass (eval
// splits them).
TEST(GemmaRing, SameLogitsAsTheWholeCache) {
    for (const std::string& path : {kGemma3, kGemma2}) {
        const auto m = Model::load(path);
        const auto ids = random_tokens(70, 21);
        const auto whole = run_params(*m, ids, {70}, ring_params(1000));
        const auto whole16 = run_params(*m, ids, {70}, ring_params(1000, specula::KVType::F16));
        for (int max_pass : {1, 5, 8}) {
            for (const auto& sizes : std::vector<std::vector<int>>{{70}, {1}, {7, 2}, {3}}) {
                // An F16 cache for the passes of 3.
                const bool f16 = sizes[0] == 3;
                const auto& want = f16 ? whole16 : whole;
                const auto got = run_params(
                    *m, ids, sizes,
                    ring_params(max_pass, f16 ? specula::KVType::F16 : specula::KVType::F32));
                ASSERT_EQ(got.size(), want.size());
                size_t first = got.size();
                double worst = 0;
                for (size_t i = 0; i < got.size(); ++i) {
                    if (got[i] != want[i] && first == got.size()) first = i;
                    worst = std::max(worst, double(std::fabs(got[i] - want[i])));
                }
                EXPECT_EQ(first, got.size())
                    << path << ": max_pass " << max_pass << ", passes of " << sizes[0]
                    << ": position " << first / size_t(m->hparams().n_vocab)
                    << " differs first (max |d| " << worst << ")";
            }
        }
        // all_logits = false over a split pass: the last row only, the same bits.
        Session s(*m, ring_params(8));
        s.eval(ids, false);
        ASSERT_EQ(s.n_logits(), 1);
        const int nv = m->hparams().n_vocab;
        EXPECT_EQ(0, std::memcmp(s.logits(0), whole.data() + (ids.size() - 1) * size_t(nv),
                                 sizeof(float) * size_t(nv)));
    }
}

TEST(GemmaRing, LayersKeepOnlyTheirWindow) {
    const auto m = Model::load(kGemma3);
    Session s(*m, ring_params(8));
    // The rows are private to the session; what it promises: a smaller cache in the memory plan.
    using specula::KVCache;
    const std::vector<int> w = {16, 16, 16, 16, 16, 0, 16};
    EXPECT_EQ(KVCache::window_rows(16, 8, 128), 23);
    EXPECT_EQ(KVCache::window_rows(16, 1000, 128), 128);
    EXPECT_EQ(KVCache::window_rows(0, 8, 128), 128);
    const double row = 2.0 * 48 * 4;  // one KV head of 48 floats, K and V in F32
    // Each layer's rows are allocated in whole key blocks of 16: a ring of 23 takes 32.
    EXPECT_EQ(KVCache::bytes(7, 128, 48, specula::KVType::F32, specula::KVType::F32, w, 8),
              (6 * 32 + 128) * row);
    specula::CachePlan cp;
    cp.n_ctx = 2048;
    cp.n_threads = 1;
    cp.type_k = cp.type_v = specula::KVType::F32;
    const specula::MemoryPlan plan = specula::plan_memory(*m, nullptr, cp, 0);
    const double rows = 6.0 * (16 - 1 + SessionParams::kDefaultSwaMaxPass) + 2048;
    EXPECT_GE(plan.target_kv, rows * row);
    EXPECT_LT(plan.target_kv, 7.0 * 2048 * row) << "the plan counts the smaller cache";
}

// BatchEvaluator over ring sessions: an item longer than swa_max_pass (evaluated on its own, in
// pieces) and a short one give the logits of separate sessions.
TEST(GemmaRing, BatchEvaluatorSplitsLongItems) {
    const auto m = Model::load(kGemma3);
    const int nv = m->hparams().n_vocab;
    const auto a = random_tokens(30, 3), b = random_tokens(6, 4);
    specula::ThreadPool pool(1);
    SessionParams sp = ring_params(8);
    sp.pool = &pool;
    Session sa(*m, sp), sb(*m, sp);
    specula::BatchEvaluator be(*m, pool);
    const specula::BatchItem items[] = {{&sa, a, true}, {&sb, b, true}};
    be.eval(items);
    ASSERT_EQ(sa.n_logits(), 30);
    ASSERT_EQ(sb.n_logits(), 6);
    const auto want_a = run_params(*m, a, {1}, ring_params(1000));
    const auto want_b = run_params(*m, b, {1}, ring_params(1000));
    for (int r = 0; r < 30; ++r)
        EXPECT_EQ(0, std::memcmp(sa.logits(r), want_a.data() + size_t(r) * nv, 4 * size_t(nv)))
            << "long item, row " << r;
    for (int r = 0; r < 6; ++r)
        EXPECT_EQ(0, std::memcmp(sb.logits(r), want_b.data() + size_t(r) * nv, 4 * size_t(nv)))
            << "short item, row " << r;
}

// Rollback across the window's edge: rolled-back rows are rewritten, and the logits after it equal
// a fresh session's on the same tokens; further back than swa_max_pass is refused, and
// common_prefix reports no reusable prefix there.
TEST(GemmaRing, RollbackAcrossTheEdge) {
    const auto m = Model::load(kGemma3);
    const int nv = m->hparams().n_vocab;
    const auto a = random_tokens(60, 1), b = random_tokens(60, 2);
    std::vector<token_id> mixed(a.begin(), a.begin() + 50);
    mixed.insert(mixed.end(), b.begin(), b.begin() + 10);
    const auto want = run_params(*m, mixed, {60}, ring_params(1000));
    Session s(*m, ring_params(10));
    s.eval(a);  // 60 tokens in passes of 10: the rings wrapped
    s.rollback(50);
    s.eval(std::span<const token_id>(b.data(), 10));
    for (int r = 0; r < 10; ++r) {
        EXPECT_EQ(0, std::memcmp(s.logits(r), want.data() + size_t(50 + r) * nv,
                                 sizeof(float) * size_t(nv)))
            << "position " << 50 + r;
    }
    EXPECT_EQ(s.common_prefix(mixed), 60);
    EXPECT_EQ(s.common_prefix(a), 50) << "10 positions back: within swa_max_pass";
    std::vector<token_id> c(a.begin(), a.begin() + 45);
    c.push_back(a[45] == 7 ? 8 : 7);
    EXPECT_EQ(s.common_prefix(c), 0) << "45 tokens are shared, but 15 back is past the limit";
    try {
        s.rollback(45);
        ADD_FAILURE() << "a rollback of 15 positions with swa_max_pass 10 was accepted";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("swa_max_pass"), std::string::npos) << e.what();
    }
    EXPECT_EQ(s.n_past(), 60);
    s.rollback(0);  // starting over is always possible
    EXPECT_EQ(s.n_past(), 0);
}

// ---------------------------------------------------------------------------------------------
// Bad input, on modified copies.

TEST(GemmaBadInput, MissingNormsNameTensorAndFile) {
    GgufEdit ed;
    ed.drop_tensor = "blk.3.post_ffw_norm.weight";
    expect_load_error(write_variant(kGemma3, "no-postffw", ed),
                      {"missing tensor", "blk.3.post_ffw_norm.weight"});
    ed.drop_tensor = "blk.0.attn_k_norm.weight";
    expect_load_error(write_variant(kGemma3, "no-knorm", ed),
                      {"missing tensor", "blk.0.attn_k_norm.weight"});
    ed.drop_tensor = "blk.25.post_attention_norm.weight";
    expect_load_error(write_variant(kGemma2, "no-postattn", ed),
                      {"missing tensor", "blk.25.post_attention_norm.weight"});
}

TEST(GemmaBadInput, ContradictingKeysNameTheKey) {
    GgufEdit ed;
    ed.drop_keys = {"gemma3.attention.sliding_window"};
    expect_load_error(write_variant(kGemma3, "no-window", ed),
                      {"missing key", "gemma3.attention.sliding_window"});
    GgufEdit ed2;
    ed2.set_u32 = {{"gemma3.attention.sliding_window", 0}};
    expect_load_error(write_variant(kGemma3, "window0", ed2),
                      {"gemma3.attention.sliding_window", "out of range"});
    GgufEdit ed3;
    ed3.set_f32 = {{"gemma2.attn_logit_softcapping", 0.f}};
    expect_load_error(write_variant(kGemma2, "softcap0", ed3),
                      {"gemma2.attn_logit_softcapping", "must be > 0"});
    GgufEdit ed4;
    ed4.set_u32 = {{"gemma2.expert_count", 4}, {"gemma2.expert_used_count", 2}};
    expect_load_error(write_variant(kGemma2, "experts", ed4), {"gemma2.expert_count"});
    GgufEdit ed5;
    ed5.set_u32 = {{"gemma3.attention.key_length", 32}, {"gemma3.attention.value_length", 32}};
    expect_load_error(write_variant(kGemma3, "hd32", ed5), {"blk.0.attn_q.weight", "shape"});
    GgufEdit ed6;
    ed6.set_u32 = {{"gemma3.attention.head_count_kv", 3}};
    expect_load_error(write_variant(kGemma3, "kv3", ed6),
                      {"gemma3.attention.head_count", "head_count_kv"});
}

TEST(GemmaBadInput, UnknownArchitectureListsGemma) {
    GgufEdit ed;
    ed.set_str = {{"general.architecture", "gemma9"}};
    expect_load_error(write_variant(kGemma3, "gemma9", ed),
                      {"unsupported architecture 'gemma9'", "gemma2", "gemma3"});
}

}  // namespace
