// nemotron_h beyond parity (test_model_parity_arch checks the logits of its two files against
// scripts/models/ref_nemotron_h.py's float64 numpy forward): the layer kinds as the file's arrays
// say; the Mamba-2 state makes a split of the tokens into passes change no bit (nor its update in
// place, without rollback support); a rollback to any position of the last pass leaves the state
// exactly as after that position; sequences batched in one pass equal each alone; greedy
// speculative decoding (a qwen3 draft, the hybrid Q8_0 file as the draft, n-gram lookup) equals
// plain greedy decoding; the memory plan counts the state and a cache for the attention layer
// only; files whose SSM sizes or layer kinds contradict each other or their tensors fail to load
// with an Error naming the key or tensor and the file.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "model/batch_eval.h"
#include "model/memory_plan.h"
#include "model/session.h"
#include "model/state/recurrent_state.h"
#include "model/state/sequence_state.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/ngram_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

namespace {

using namespace specula;
using namespace specula::test;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kF16 = kDir + "rand-nemotron_h-tok512-d128-l6-F16.gguf";  // M F M A F M
const std::string kQ8 = kDir + "rand-nemotron_h-tok512-d128-l4-Q8_0.gguf";  // M A M F

std::vector<float> row(const Session& s, int i) {
    const int nv = s.model().hparams().n_vocab;
    return std::vector<float>(s.logits(i), s.logits(i) + nv);
}

TEST(NemotronH, LayerKindsAsTheFileSays) {
    const auto m = Model::load(kF16);
    const auto& hp = m->hparams();
    EXPECT_EQ(hp.arch, "nemotron_h");
    ASSERT_EQ(hp.n_layer, 6);
    EXPECT_EQ(hp.ssm_kind, HParams::SsmKind::Mamba2);
    const char* kinds = "MFMAFM";
    for (int il = 0; il < 6; ++il) {
        const auto& l = m->layers[size_t(il)];
        EXPECT_EQ(hp.is_recurrent(il), kinds[il] == 'M') << il;
        EXPECT_EQ(l.ssm_in.data != nullptr, kinds[il] == 'M') << il;
        EXPECT_EQ(l.wq.data != nullptr, kinds[il] == 'A') << il;
        EXPECT_EQ(l.ffn_up.data != nullptr, kinds[il] == 'F') << il;
        EXPECT_EQ(hp.layer_n_head_kv(il), kinds[il] == 'A' ? 2 : 0) << il;
        EXPECT_EQ(hp.layer_n_ff(il), kinds[il] == 'F' ? 256 : 0) << il;
    }
    EXPECT_EQ(hp.ssm_d_inner, 128);
    EXPECT_EQ(hp.ssm_dt_rank, 8);
    EXPECT_EQ(hp.ssm_conv_dim(), 128 + 2 * 2 * 16);
    EXPECT_EQ(hp.n_rot, 0);
    EXPECT_NE(m->layers[0].ssm_conv1d_b, nullptr);
    // A decode step streams every layer matrix and the output (not the embedding table).
    int64_t matrices = 0;
    for (const auto& t : m->file().tensors())
        if (t.ne.size() == 2 && t.ne[0] > 1 && t.ne[1] > 1 &&
            t.name.find("ssm_conv1d") == std::string::npos &&
            t.name.find("ssm_norm") == std::string::npos && t.name != "token_embd.weight")
            matrices += int64_t(t.nbytes);
    EXPECT_EQ(m->bytes_per_token(), matrices);
    // Only the attention layer keeps a cache.
    const auto w = kv_windows(hp);
    for (int il = 0; il < 6; ++il) EXPECT_EQ(w[size_t(il)], kinds[il] == 'A' ? 0 : -1) << il;
}

TEST(NemotronH, PassesOfAnySizeGiveTheSameLogits) {
    for (const auto& path : {kF16, kQ8})
        expect_batch_invariant(path, random_tokens(40, 7), {{9}, {5, 1, 3}});
    // 100 tokens in one pass: the conv split over the pool's threads, no inputs kept (> kKeepMax).
    expect_batch_invariant(kF16, random_tokens(100, 8), {{9}});
}

// Without rollback support (one state updated in place: the conv and scan read and write the
// same buffers) the logits are the same bits.
TEST(NemotronH, StateUpdatedInPlaceGivesTheSameLogits) {
    const auto m = Model::load(kF16);
    const auto ids = random_tokens(30, 9);
    SessionParams sp{128, 2};
    Session a(*m, sp);
    sp.recurrent_rollback = false;
    Session b(*m, sp);
    for (Session* s : {&a, &b}) {
        s->eval(std::span(ids).first(21));
        s->eval(std::span(ids).subspan(21, 9));
    }
    for (int i = 0; i < 9; ++i) EXPECT_EQ(row(a, i), row(b, i)) << "row " << i;
}

// After a pass over [last, d1..d8], rollback to each position of it and the next token's
// logits are bit-identical to a session that evaluated exactly those positions.
TEST(NemotronH, RollbackInsideTheLastPassIsExact) {
    for (const auto& path : {kF16, kQ8}) {
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
            Session ref(*m, SessionParams{128, 1});
            ref.eval(std::span(ids).first(size_t(n0 + keep)));
            ref.eval(std::span(&next, 1));
            const auto got = row(s, 0), want = row(ref, 0);
            EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
                << path << ": rollback to " << n0 + keep;
        }
        // Before the last pass: refused, nothing changed.
        Session s(*m, SessionParams{128, 1});
        s.eval(std::span(ids).first(20));
        s.eval(std::span(ids).subspan(20, 5));
        EXPECT_FALSE(s.can_rollback(19));
        EXPECT_THROW(s.rollback(19), Error);
        EXPECT_EQ(s.n_past(), 25);
    }
}

// Several sequences in one pass: each one's logits, and its state after a rollback inside that
// pass, are bit-identical to evaluating it alone.
TEST(NemotronH, BatchedSequencesEqualAloneAndRollBackAlone) {
    const auto m = Model::load(kF16);
    ThreadPool pool(2);
    SessionParams sp{128, 0};
    sp.pool = &pool;
    Session a(*m, sp), b(*m, sp), ra(*m, sp), rb(*m, sp);
    const auto ta = random_tokens(30, 21), tb = random_tokens(30, 22);
    BatchEvaluator be(*m, pool);
    const BatchItem prompt[] = {{&a, std::span(ta).first(12), false},
                                {&b, std::span(tb).first(17), false}};
    be.eval(prompt);
    const BatchItem verify[] = {{&a, std::span(ta).subspan(12, 9), true},
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

std::vector<token_id> generate(Session& target, Drafter* drafter,
                               const std::vector<token_id>& prompt, int n_draft, SpecStats* st) {
    SamplingParams sp;
    sp.temp = 0.f;
    Sampler sampler(sp);
    GenParams gp;
    gp.n_predict = 32;
    gp.ignore_eos = true;
    gp.n_draft = n_draft;
    return generate_tokens(target, sampler, drafter, prompt, gp, st);
}

// Every rejected draft rolls the Mamba-2 states back inside the verify pass: the output equals
// plain greedy decoding with a qwen3 draft (same tok512 vocabulary), the hybrid Q8_0 file as the
// draft (its own single-token passes roll back no further than the last one) and n-gram lookup.
TEST(NemotronH, GreedySpeculativeEqualsPlain) {
    auto qwen3_draft = Model::load(kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf");
    auto hybrid_draft = Model::load(kQ8);
    auto target = Model::load(kF16);
    Session session(*target, SessionParams{0, 1});
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling.temp = 0.f;
    DraftModelDrafter d_qwen3(*qwen3_draft, dp), d_hybrid(*hybrid_draft, dp);
    NgramDrafter ngram(NgramParams{});
    const auto ref =
        nlohmann::json::parse(read_file(kDir + "rand-nemotron_h-tok512-d128-l6-F16.json"));
    int n_prompts = 0, n_accepted = 0;
    for (const auto& p : ref["prompts"]) {
        if (++n_prompts > 2) break;  // two prompts keep the test short
        const auto prompt = p["token_ids"].get<std::vector<token_id>>();
        const auto plain = generate(session, nullptr, prompt, 0, nullptr);
        ASSERT_EQ(int(plain.size()), 32);
        EXPECT_EQ(plain, p["greedy"]["token_ids"].get<std::vector<token_id>>())
            << "plain greedy equals the float64 reference's";
        for (Drafter* d : {(Drafter*)&d_qwen3, (Drafter*)&d_hybrid, (Drafter*)&ngram}) {
            for (int n : {1, 3, 8}) {
                if (d == &d_hybrid && n != 3) continue;  // it re-evaluates after each rejection
                SpecStats st;
                EXPECT_EQ(generate(session, d, prompt, n, &st), plain)
                    << "prompt " << p["name"] << ", " << d->name() << ", N=" << n;
                n_accepted += st.n_accepted;
            }
        }
    }
    EXPECT_GT(n_accepted, 0) << "no draft token was ever accepted: no rollback was tested";
}

TEST(NemotronH, MemoryPlanCountsTheStateAndOnlyTheAttentionCache) {
    for (const auto& path : {kF16, kQ8}) {
        const auto m = Model::load(path);
        const auto& hp = m->hparams();
        // Per Mamba-2 layer: two copies of the conv (3 x conv_dim) and scan (d_inner x d_state)
        // state, kKeepMax positions of conv_dim + n_head inputs; one replay scratch.
        const double conv = 3.0 * 192, ssm = 128.0 * 16;
        const double keep = RecurrentState::kKeepMax * (192.0 + 8);
        const double want =
            4 * (hp.n_recurrent() * (2 * (conv + ssm) + keep) + RecurrentState::kKeepMax * 192.0);
        EXPECT_EQ(RecurrentState::bytes(hp), want);
        CachePlan cp;
        cp.n_ctx = 256;
        cp.n_threads = 1;
        const auto plan = plan_memory(*m, nullptr, cp, 0);
        std::vector<int> windows(size_t(hp.n_layer), -1);
        int n_att = 0;
        for (int il = 0; il < hp.n_layer; ++il) {
            if (hp.layer_n_head_kv(il) > 0) {
                windows[size_t(il)] = 0;
                ++n_att;
            }
        }
        EXPECT_EQ(n_att, 1);
        const double kv = KVCache::bytes(hp.n_layer, 256, 64, cp.type_k, cp.type_v, windows,
                                         SessionParams::kDefaultSwaMaxPass);
        EXPECT_EQ(plan.target_kv, kv + want) << path;
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input, on modified copies.

// A copy of src with one integer-array key replaced.
std::string with_array(const std::string& src_path, const std::string& tag, const std::string& key,
                       const std::vector<int32_t>& v) {
    const auto src = GGUFFile::open(src_path);
    GGUFWriter w;
    for (const auto& [k, val] : src->metadata()) w.set(k, val);
    w.set_i32_array(key, v);
    for (const auto& t : src->tensors()) w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
    const std::string path = temp_dir("arch") + "/" + tag + ".gguf";
    w.write(path);
    return path;
}

TEST(NemotronHBadInput, SsmSizesThatDoNotDivideNameTheKey) {
    GgufEdit ed;  // 100 channels over 8 heads
    ed.set_u32 = {{"nemotron_h.ssm.inner_size", 100}};
    expect_load_error(write_variant(kF16, "inner", ed),
                      {"nemotron_h.ssm.inner_size", "ssm.time_step_rank"});
    GgufEdit ed2;  // 8 heads over 3 groups
    ed2.set_u32 = {{"nemotron_h.ssm.group_count", 3}};
    expect_load_error(write_variant(kF16, "groups", ed2),
                      {"nemotron_h.ssm.time_step_rank", "ssm.group_count"});
    GgufEdit ed3;
    ed3.set_u32 = {{"nemotron_h.ssm.conv_kernel", 0}};
    expect_load_error(write_variant(kQ8, "conv0", ed3), {"nemotron_h.ssm.conv_kernel", "range"});
    GgufEdit ed4;
    ed4.drop_keys = {"nemotron_h.ssm.state_size"};
    expect_load_error(write_variant(kQ8, "nostate", ed4), {"nemotron_h.ssm.state_size"});
    GgufEdit ed5;  // MTP layers would run as main layers: refused
    ed5.set_u32 = {{"nemotron_h.nextn_predict_layers", 1}};
    expect_load_error(write_variant(kQ8, "nextn", ed5), {"nemotron_h.nextn_predict_layers"});
}

TEST(NemotronHBadInput, SsmSizesThatContradictTheTensorsNameTheTensor) {
    GgufEdit ed;  // a state of 8: ssm_in would have 2 x 128 + 2 x 2 x 8 + 8 rows
    ed.set_u32 = {{"nemotron_h.ssm.state_size", 8}};
    expect_load_error(write_variant(kF16, "state8", ed), {"blk.0.ssm_in.weight", "shape"});
    GgufEdit ed2;
    ed2.set_u32 = {{"nemotron_h.ssm.conv_kernel", 5}};
    expect_load_error(write_variant(kF16, "conv5", ed2), {"blk.0.ssm_conv1d.weight", "shape"});
    GgufEdit ed3;
    ed3.drop_tensor = "blk.2.ssm_d";
    expect_load_error(write_variant(kF16, "no-d", ed3), {"missing tensor", "blk.2.ssm_d"});
}

TEST(NemotronHBadInput, LayerKindsThatContradictTheTensorsNameTheTensor) {
    const std::string kv = "nemotron_h.attention.head_count_kv",
                      ff = "nemotron_h.feed_forward_length";
    // Layer 0 (Mamba-2 tensors) declared attention.
    expect_load_error(with_array(kF16, "kv0", kv, {2, 0, 0, 2, 0, 0}),
                      {"blk.0.ssm_in.weight", "attention layer", kv, ff});
    // Layer 1 (MLP tensors) declared Mamba-2.
    expect_load_error(with_array(kF16, "ff1", ff, {0, 0, 0, 0, 256, 0}),
                      {"blk.1.ffn_up.weight", "Mamba-2 layer", kv, ff});
    // Layer 3 both attention and MLP.
    expect_load_error(with_array(kF16, "both", ff, {0, 256, 0, 256, 256, 0}),
                      {"layer 3 has both", kv, ff});
    // One value short.
    expect_load_error(with_array(kF16, "short", ff, {0, 256, 0, 0, 256}), {ff, "6 values"});
    // KV heads that do not divide the query heads.
    expect_load_error(with_array(kF16, "kv3", kv, {0, 0, 0, 3, 0, 0}),
                      {"nemotron_h.attention.head_count", "head_count_kv[3] = 3"});
}

}  // namespace
