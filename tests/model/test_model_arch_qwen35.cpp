// qwen35 and qwen35moe beyond parity (test_model_parity_arch checks the logits against
// ik_llama.cpp): the recurrent state makes a split of the tokens into passes change no bit; a
// rollback to any position of the last pass leaves the state exactly as after that position (the
// next logits are bit-identical to a session that never went further), further back is an Error
// and common_prefix never reports it; the memory plan counts the state; files whose state
// dimensions contradict each other or their tensors fail to load with an Error naming the key or
// tensor and the file. Uses the small files of tests/data/arch and modified copies of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/batch_eval.h"
#include "model/blocks/attention.h"
#include "model/memory_plan.h"
#include "model/session.h"
#include "model/state/recurrent_state.h"
#include "test_util.h"

namespace {

using namespace specula::test;

using specula::Model;
using specula::RecurrentState;
using specula::Session;
using specula::SessionParams;
using specula::token_id;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kDense = kDir + "rand-qwen35-tok512-d128-l4-F16.gguf";
const std::string kMoe = kDir + "rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf";

std::vector<float> row(const Session& s, int i) {
    const int nv = s.model().hparams().n_vocab;
    return std::vector<float>(s.logits(i), s.logits(i) + nv);
}

TEST(Qwen35, PassesOfAnySizeGiveTheSameLogits) {
    for (const auto& path : {kDense, kMoe})
        expect_batch_invariant(path, random_tokens(40, 7), {{9}, {5, 1, 3}});
}

TEST(Qwen35, HyperparametersAsWritten) {
    const auto m = Model::load(kDense);
    const auto& hp = m->hparams();
    EXPECT_EQ(hp.arch, "qwen35");
    EXPECT_EQ(hp.n_layer, 4);
    EXPECT_EQ(hp.n_recurrent(), 3);  // full_attention_interval 4: layer 3 attends
    EXPECT_FALSE(hp.is_recurrent(3));
    EXPECT_EQ(hp.ssm_d_state, 64);
    EXPECT_EQ(hp.ssm_conv_dim(), 2 * 64 + 128);
    EXPECT_EQ(hp.n_rot, 8);
    EXPECT_TRUE(hp.attn_gated);
    EXPECT_TRUE(m->rope_freq_factors.empty());  // sections 2,1,1,0: every pair rotates
    const auto moe = Model::load(kMoe);
    EXPECT_EQ(moe->hparams().n_recurrent(), 2);  // interval 2: layers 0 and 2
    EXPECT_EQ(moe->hparams().n_ff_shexp, 64);
    // Sections 1,1,1,1: the fourth of the 4 rotated pairs is the vision one, left unrotated.
    ASSERT_EQ(moe->rope_freq_factors.size(), 4u);
    EXPECT_TRUE(std::isinf(moe->rope_freq_factors[3]));
}

// After a pass over [last, d1..d8], rollback to each position i of it and the next token's
// logits are bit-identical to a session that evaluated exactly the first i positions.
TEST(Qwen35, RollbackInsideTheLastPassIsExact) {
    for (const auto& path : {kDense, kMoe}) {
        const auto m = Model::load(path);
        const auto ids = random_tokens(40, 11);
        const int n0 = 20, k = 9;
        for (int keep = 0; keep <= k; ++keep) {
            Session s(*m, SessionParams{128, 1});
            s.eval(std::span(ids).first(n0));
            s.eval(std::span(ids).subspan(n0, k));
            ASSERT_TRUE(s.can_rollback(n0 + keep));
            s.rollback(n0 + keep);
            const token_id next = ids[size_t(n0 + k)];
            s.eval(std::span(&next, 1));
            const auto got = row(s, 0);
            Session ref(*m, SessionParams{128, 1});
            ref.eval(std::span(ids).first(size_t(n0 + keep)));
            ref.eval(std::span(&next, 1));
            const auto want = row(ref, 0);
            EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
                << path << ": rollback to " << n0 + keep;
            // And again inside the same pass (the snapshot stays): back to its start.
            s.rollback(n0 + keep);  // drops `next`: the state after position n0 + keep - 1
        }
    }
}

TEST(Qwen35, RollbackBeforeTheLastPassIsAnErrorAndNeverAPrefix) {
    const auto m = Model::load(kDense);
    const auto ids = random_tokens(40, 3);
    Session s(*m, SessionParams{128, 1});
    s.eval(std::span(ids).first(20));
    s.eval(std::span(ids).subspan(20, 5));
    EXPECT_FALSE(s.can_rollback(19));
    try {
        s.rollback(19);
        ADD_FAILURE() << "rollback before the last pass succeeded";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("recurrent state"), std::string::npos) << e.what();
    }
    EXPECT_EQ(s.n_past(), 25) << "a refused rollback changes nothing";
    // The shared prefix is 23 (inside the last pass): reported. One of 17: only the restorable
    // 0 is (everything before the pass's start is gone).
    std::vector<token_id> t(ids.begin(), ids.begin() + 25);
    t[23] = (t[23] + 1) % 512;
    EXPECT_EQ(s.common_prefix(t), 23);
    t[17] = (t[17] + 1) % 512;
    EXPECT_EQ(s.common_prefix(t), 0);
    // Rollback to 0 always works and starts from a zero state.
    s.rollback(0);
    s.eval(std::span(ids).first(3));
    Session ref(*m, SessionParams{128, 1});
    ref.eval(std::span(ids).first(3));
    EXPECT_EQ(row(s, 2), row(ref, 2));
}

// Several sequences in one pass (the server's batched step): each one's logits, and its state
// after a rollback inside that pass, are bit-identical to evaluating it alone.
TEST(Qwen35, BatchedSequencesEqualAloneAndRollBackAlone) {
    const auto m = Model::load(kMoe);
    specula::ThreadPool pool(2);
    SessionParams sp{128, 0};
    sp.pool = &pool;
    Session a(*m, sp), b(*m, sp), ra(*m, sp), rb(*m, sp);
    const auto ta = random_tokens(30, 21), tb = random_tokens(30, 22);
    specula::BatchEvaluator be(*m, pool);
    const specula::BatchItem prompt[] = {{&a, std::span(ta).first(12), false},
                                         {&b, std::span(tb).first(17), false}};
    be.eval(prompt);
    const specula::BatchItem verify[] = {{&a, std::span(ta).subspan(12, 9), true},
                                         {&b, std::span(tb).subspan(17, 9), true}};
    be.eval(verify);
    ra.eval(std::span(ta).first(21));
    rb.eval(std::span(tb).first(26));
    for (int i = 0; i < 9; ++i) {
        EXPECT_EQ(row(a, i), row(ra, 12 + i)) << "a, row " << i;
        EXPECT_EQ(row(b, i), row(rb, 17 + i)) << "b, row " << i;
    }
    a.rollback(12 + 3);
    b.rollback(17 + 7);
    ra.rollback(0);
    rb.rollback(0);
    ra.eval(std::span(ta).first(15));
    rb.eval(std::span(tb).first(24));
    const token_id x = 5;
    for (Session* s : {&a, &b, &ra, &rb}) s->eval(std::span(&x, 1));
    EXPECT_EQ(row(a, 0), row(ra, 0));
    EXPECT_EQ(row(b, 0), row(rb, 0));
}

// A pass longer than RecurrentState::kKeepMax keeps no inputs: its start and its end are the
// only positions inside it to return to.
TEST(Qwen35, LongPassKeepsOnlyItsStart) {
    const auto m = Model::load(kDense);
    const int n = RecurrentState::kKeepMax + 6;
    const auto ids = random_tokens(n + 4, 5);
    Session s(*m, SessionParams{256, 1});
    s.eval(std::span(ids).first(4));
    s.eval(std::span(ids).subspan(4, size_t(n)));
    EXPECT_FALSE(s.can_rollback(10));
    EXPECT_THROW(s.rollback(10), specula::Error);
    EXPECT_TRUE(s.can_rollback(4));
    s.rollback(4);
    s.eval(std::span(ids).subspan(4, 1));
    Session ref(*m, SessionParams{256, 1});
    ref.eval(std::span(ids).first(5));
    EXPECT_EQ(row(s, 0), row(ref, 4));
}

TEST(Qwen35, MemoryPlanCountsTheRecurrentState) {
    const std::string mtp = kDir + "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf";
    for (const auto& path : {kDense, kMoe, mtp}) {
        const auto m = Model::load(path);
        const auto& hp = m->hparams();
        // Per DeltaNet layer: two copies of conv (3 x conv_dim) + delta (n_v x 64 x 64) state, and
        // kKeepMax positions of conv_dim + 2 n_v inputs; one replay scratch of kKeepMax rows.
        const double conv = 3.0 * hp.ssm_conv_dim(), ssm = hp.ssm_dt_rank * 64.0 * 64.0;
        const double keep = RecurrentState::kKeepMax * (hp.ssm_conv_dim() + 2.0 * hp.ssm_dt_rank);
        const double want = 4 * (hp.n_recurrent() * (2 * (conv + ssm) + keep) +
                                 RecurrentState::kKeepMax * double(hp.ssm_conv_dim()));
        EXPECT_EQ(RecurrentState::bytes(hp), want);
        specula::CachePlan cp;
        cp.n_ctx = 256;
        cp.n_threads = 1;
        const auto plan = specula::plan_memory(*m, nullptr, cp, 0);
        std::vector<int> windows(size_t(hp.n_layer), 0);  // only attention layers have a cache
        for (int il = 0; il < hp.n_layer; ++il)
            if (hp.is_recurrent(il)) windows[size_t(il)] = -1;
        EXPECT_EQ(specula::KVCache::window_rows(-1, 12, 256), 0);
        const specula::AttentionShape sh{hp.n_head, hp.n_head_kv, hp.head_dim, 1.f};
        const double kv =
            specula::KVCache::bytes(hp.n_layer, 256, hp.n_embd_kv(), cp.type_k, cp.type_v, windows,
                                    SessionParams::kDefaultSwaMaxPass);
        // The attention scratch is the pass's (counted once per model, not per sequence).
        EXPECT_GE(plan.target_pass, 4.0 * double(specula::attention_scratch_floats(sh, 256, 1)));
        // An MTP head's own one-layer cache.
        const double head =
            m->has_mtp() ? specula::KVCache::bytes(1, 256, hp.n_embd_kv(), cp.type_k, cp.type_v)
                         : 0.0;
        EXPECT_EQ(m->has_mtp(), path == mtp);
        EXPECT_EQ(plan.target_kv, kv + want + head) << path;
    }
}

// ---------------------------------------------------------------------------------------------
// Bad state dimensions, on modified copies.

TEST(Qwen35BadInput, InconsistentStateKeysNameTheKey) {
    GgufEdit ed;
    ed.set_u32 = {{"qwen35.ssm.inner_size", 100}};
    expect_load_error(write_variant(kDense, "inner", ed), {"qwen35.ssm.inner_size", "128"});
    GgufEdit ed2;
    ed2.set_u32 = {{"qwen35moe.ssm.group_count", 3}};  // 4 value heads over 3 key heads
    expect_load_error(write_variant(kMoe, "groups", ed2),
                      {"qwen35moe.ssm.time_step_rank", "ssm.group_count"});
    GgufEdit ed3;
    ed3.set_u32 = {{"qwen35.ssm.state_size", 1 << 20}};
    expect_load_error(write_variant(kDense, "huge", ed3), {"qwen35.ssm.state_size", "range"});
}

TEST(Qwen35BadInput, StateSizesThatContradictTheTensorsNameTheTensor) {
    GgufEdit ed;  // 2 value heads of 32: 64 = inner_size, but the tensors hold heads of 64
    ed.set_u32 = {{"qwen35.ssm.state_size", 32}, {"qwen35.ssm.inner_size", 64}};
    expect_load_error(write_variant(kDense, "state32", ed), {"blk.0.", "shape"});
    GgufEdit ed2;
    ed2.set_u32 = {{"qwen35.ssm.conv_kernel", 5}};
    expect_load_error(write_variant(kDense, "conv5", ed2), {"blk.0.ssm_conv1d.weight", "shape"});
    GgufEdit ed3;
    ed3.drop_tensor = "blk.2.ssm_a";
    expect_load_error(write_variant(kDense, "no-a", ed3), {"missing tensor", "blk.2.ssm_a"});
    GgufEdit ed4;  // every layer full attention: layer 0 has no attn_q
    ed4.set_u32 = {{"qwen35moe.full_attention_interval", 1}};
    expect_load_error(write_variant(kMoe, "interval1", ed4), {"blk.0.attn_q.weight"});
}

}  // namespace
