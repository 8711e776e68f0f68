// deepseek2 beyond parity (test_model_parity_arch checks the logits against ik_llama.cpp): the
// MLA shapes the file implies (the cache keeps one latent row of kv_lora + rope values per
// position, once: V reads K's rows, and the memory plan, `run` and `info` count exactly that;
// -ctv changes nothing), a pass over b tokens gives bit-identical
// logits to b one-token passes, greedy speculative decoding equals plain, expert groups narrow
// the routing (and all groups used changes nothing), the nextn (MTP) head drafts for greedy
// speculative decoding equal to plain (ik_llama.cpp runs no deepseek2 head but GLM-DSA's, so there
// is no reference for its logits: it is the main layers' block over its own latent cache, whose
// glue forward_mtp shares with glm4moe's, checked against ik_llama.cpp in test_mtp_parity), and
// files whose metadata contradicts their tensors fail with an Error naming the key or tensor and
// the file.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "cli_process.h"
#include "common/error.h"
#include "common/format.h"
#include "model/memory_plan.h"
#include "model/session.h"
#include "model/state/kv_cache.h"
#include "model/state/sequence_state.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/mtp_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

namespace {

using namespace specula::test;

using specula::KVCache;
using specula::KVType;
using specula::Model;
using specula::Session;
using specula::SessionParams;
using specula::token_id;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kF16 = kDir + "rand-deepseek2-e8x2-tok512-d128-l3-F16.gguf";
const std::string kQ8 = kDir + "rand-deepseek2-e8x2-tok512-d128-l3-Q8_0.gguf";
const std::string kDraft = kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf";
// The F16 file's three layers (the same seeds) and a fourth block, its nextn head.
const std::string kMtp = kDir + "rand-deepseek2-mtp1-e8x2-tok512-d128-l3-F16.gguf";

TEST(Deepseek2, HyperparametersAsWritten) {
    const auto m = Model::load(kF16);
    const auto& hp = m->hparams();
    EXPECT_EQ(hp.arch, "deepseek2");
    EXPECT_EQ(hp.n_layer, 3);
    EXPECT_EQ(hp.mla_kv_lora_rank, 64);
    EXPECT_EQ(hp.mla_q_lora_rank, 96);
    EXPECT_EQ(hp.mla_head_k, 64);
    EXPECT_EQ(hp.mla_head_v, 32);
    EXPECT_EQ(hp.n_rot, 32);
    EXPECT_EQ(hp.head_dim, 96);  // the cache's one head: the latent and the rope dims
    EXPECT_EQ(hp.n_head_kv, 1);
    EXPECT_FLOAT_EQ(hp.attn_scale, 1.0f / 8.0f);  // 1 / sqrt(key_length)
    EXPECT_EQ(hp.n_layer_dense_lead, 1);
    EXPECT_EQ(hp.n_ff_shexp, 64);
    EXPECT_TRUE(hp.moe_sigmoid);
    EXPECT_TRUE(hp.moe_norm_w);
    EXPECT_FLOAT_EQ(hp.moe_w_scale, 1.8f);
    EXPECT_EQ(m->layers[0].ffn_gate_inp, nullptr);  // the leading dense layer
    EXPECT_NE(m->layers[1].ffn_exp_probs_b, nullptr);
    const auto q8 = Model::load(kQ8);
    EXPECT_FALSE(q8->hparams().moe_sigmoid);
    EXPECT_FALSE(q8->hparams().moe_norm_w);
    EXPECT_EQ(q8->layers[1].ffn_exp_probs_b, nullptr);
}

// The cache holds latent rows, once: 64 + 32 values per position and layer as K, which V reads
// (HParams::kv_v_is_k), against 4 heads x (64 + 32) that the expanded K and V would take. The
// memory plan counts K's rows only, half of a K and a V copy, whatever -ctv says, and `run` and
// `info` print that.
TEST(Deepseek2, CacheHoldsLatentRowsOnce) {
    const auto m = Model::load(kF16);
    const auto shapes = specula::kv_shapes(m->hparams());
    ASSERT_EQ(shapes.size(), 3u);
    for (const auto& s : shapes) {
        EXPECT_EQ(s.n_embd_kv, 96);
        EXPECT_EQ(s.head_dim, 96);
        EXPECT_TRUE(s.v_is_k);
    }
    const int n_ctx = 256;
    const double want = 3.0 * n_ctx * 96 * 2;  // F16 K rows
    const auto windows = specula::kv_windows(m->hparams());
    for (KVType tv : {KVType::F16, KVType::F32, KVType::Q8_0})
        EXPECT_EQ(KVCache::bytes(shapes, n_ctx, KVType::F16, tv, windows, 0), want);
    auto twice = shapes;
    for (auto& s : twice) s.v_is_k = false;
    EXPECT_EQ(KVCache::bytes(twice, n_ctx, KVType::F16, KVType::F16, windows, 0), 2 * want);
    const double expanded = 3.0 * n_ctx * (4 * 64 + 4 * 32) * 2;
    EXPECT_LT(want, expanded);
    specula::CachePlan cp;
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    cp.type_v = KVType::F32;  // does not apply: V is K
    const specula::MemoryPlan plan = specula::plan_memory(*m, nullptr, cp, 0);
    EXPECT_EQ(plan.target_kv, want);
    const std::string kv = "KV " + specula::format_bytes(uint64_t(want));
    EXPECT_NE(specula::describe(plan).find(kv + " +"), std::string::npos)
        << specula::describe(plan);
    const auto run = run_specula({"run", "-m", kF16, "-p", "hi", "-n", "2", "--temp", "0", "-t",
                                  "1", "-c", std::to_string(n_ctx), "-ctv", "f32"});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_NE(run.err.find(kv + " +"), std::string::npos) << run.err;
    const auto info = run_specula({"info", "-m", kF16, "-c", std::to_string(n_ctx)});
    ASSERT_EQ(info.status, 0) << info.err;
    // The estimate from the keys alone and the engine's line.
    const std::string at = specula::format_bytes(uint64_t(want)) + " at n_ctx 256";
    const size_t first = info.out.find(at);
    ASSERT_NE(first, std::string::npos) << info.out;
    EXPECT_NE(info.out.find(at, first + 1), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("stored once: V reads K's rows"), std::string::npos) << info.out;
}

// V reads K's rows of K's type: -ctv changes nothing (llama.cpp's MLA cache has no V of its own).
TEST(Deepseek2, ValueTypeFollowsTheKeyType) {
    const auto m = Model::load(kF16);
    const auto ids = random_tokens(20, 3);
    for (KVType tk : {KVType::F16, KVType::Q8_0}) {
        std::vector<std::vector<float>> got;
        for (KVType tv : {tk, KVType::F32, KVType::Q8_0}) {
            SessionParams p;
            p.n_ctx = 64;
            p.n_threads = 1;
            p.type_k = tk;
            p.type_v = tv;
            Session s(*m, p);
            s.eval(ids);
            const float* last = s.logits(s.n_logits() - 1);
            got.emplace_back(last, last + m->hparams().n_vocab);
        }
        EXPECT_EQ(got[1], got[0]) << specula::kv_type_name(tk);
        EXPECT_EQ(got[2], got[0]) << specula::kv_type_name(tk);
    }
}

TEST(Deepseek2, BatchOfTokensEqualsOneAtATime) {
    for (const std::string& path : {kF16, kQ8})
        expect_batch_invariant(path, random_tokens(40, 11), {{9}, {5, 1, 3}, {16, 2}});
}

std::vector<token_id> generate(Session& target, specula::Drafter* drafter,
                               const std::vector<token_id>& prompt, int n_draft,
                               specula::SpecStats* st = nullptr) {
    specula::SamplingParams sp;
    sp.temp = 0.f;
    specula::Sampler sampler(sp);
    specula::GenParams gp;
    gp.n_predict = 24;
    gp.ignore_eos = true;
    gp.n_draft = n_draft;
    return specula::generate_tokens(target, sampler, drafter, prompt, gp, st);
}

// With the 1-layer qwen3 draft (same vocabulary) and with the target as its own draft (always
// accepted: rejected and accepted rows of the latent cache both exercised).
TEST(Deepseek2, SpeculativeGreedyEqualsPlain) {
    auto qwen3 = Model::load(kDraft);
    for (const std::string& path : {kF16, kQ8}) {
        auto target = Model::load(path);
        auto self = Model::load(path);
        Session session(*target, SessionParams{256, 1});
        specula::DraftModelParams dp;
        dp.n_threads = 1;
        dp.sampling.temp = 0.f;
        specula::DraftModelDrafter d_qwen3(*qwen3, dp), d_self(*self, dp);
        const std::string ref_path = path.substr(0, path.size() - 5) + ".json";
        const auto ref = nlohmann::json::parse(specula::test::read_file(ref_path));
        for (const auto& p : ref["prompts"]) {
            const auto prompt = p["token_ids"].get<std::vector<token_id>>();
            const auto plain = generate(session, nullptr, prompt, 0);
            ASSERT_EQ(plain.size(), 24u);
            for (int n : {1, 4}) {
                specula::SpecStats st;
                EXPECT_EQ(generate(session, &d_qwen3, prompt, n, &st), plain)
                    << path << ", prompt " << p["name"] << ", N=" << n;
                specula::SpecStats st_self;
                EXPECT_EQ(generate(session, &d_self, prompt, n, &st_self), plain)
                    << path << " (self draft), prompt " << p["name"] << ", N=" << n;
                EXPECT_EQ(st_self.n_accepted, st_self.n_drafted) << "the target as its own draft";
                EXPECT_LT(st_self.n_target_passes, 24);
            }
        }
    }
}

std::vector<float> logits_of(const std::string& path, const std::vector<token_id>& ids) {
    return run_split(*Model::load(path), ids, {int(ids.size())}, 1);
}

// The head's own cache keeps latent rows once too (the plan counts 3 + 1 layers of 96 values), and
// the main pass is the F16 file's.
TEST(Deepseek2Mtp, HeadCacheKeepsLatentRowsAndTheMainPassIsUnchanged) {
    const auto m = Model::load(kMtp);
    ASSERT_TRUE(m->has_mtp());
    EXPECT_EQ(m->hparams().n_layer, 3);
    EXPECT_EQ(m->hparams().n_nextn, 1);
    const specula::KVLayerShape head = specula::mtp_kv_shape(m->hparams());
    EXPECT_EQ(head.n_embd_kv, 96);
    EXPECT_TRUE(head.v_is_k);
    specula::CachePlan cp;
    cp.n_ctx = 256;
    cp.n_threads = 1;
    EXPECT_EQ(specula::plan_memory(*m, nullptr, cp, 0).target_kv, 4.0 * 256 * 96 * 2);
    const auto ids = random_tokens(24, 5);
    EXPECT_EQ(logits_of(kMtp, ids), logits_of(kF16, ids));
}

// The head drafting k = 1 and chained k = 3 in the library, and `run --spec-type mtp`: the same
// tokens as plain greedy decoding, with drafts made.
TEST(Deepseek2Mtp, GreedySpeculativeWithTheHeadEqualsPlain) {
    const auto target = Model::load(kMtp);
    Session session(*target, SessionParams{256, 1});
    specula::SamplingParams greedy;
    greedy.temp = 0.f;
    specula::MtpDrafter mtp(*target, greedy);
    const auto ref =
        nlohmann::json::parse(specula::test::read_file(kF16.substr(0, kF16.size() - 5) + ".json"));
    for (const auto& p : ref["prompts"]) {
        const auto prompt = p["token_ids"].get<std::vector<token_id>>();
        const auto plain = generate(session, nullptr, prompt, 0);
        for (int n : {1, 3}) {
            specula::SpecStats st;
            EXPECT_EQ(generate(session, &mtp, prompt, n, &st), plain)
                << "prompt " << p["name"] << ", N=" << n;
            EXPECT_GT(st.n_drafted, 0);
            EXPECT_LE(st.n_accepted, st.n_drafted);
        }
    }
    const std::vector<std::string> cmd = {"run", "-m",     kMtp, "-p", "Once upon a time",
                                          "-n",  "12",     "-t", "1",  "--temp",
                                          "0",   "--seed", "1"};
    const auto plain = run_specula(cmd);
    ASSERT_EQ(plain.status, 0) << plain.err;
    auto with_head = cmd;
    with_head.insert(with_head.end(), {"--spec-type", "mtp", "--draft-max", "3"});
    const auto spec = run_specula(with_head);
    ASSERT_EQ(spec.status, 0) << spec.err;
    EXPECT_EQ(spec.out, plain.out);
}

// 8 experts in 4 groups of 2: with one group used, each token's 2 experts come from one group,
// which changes the logits; with every group used the routing is the plain top-k.
TEST(Deepseek2, ExpertGroupsNarrowTheRouting) {
    const auto ids = random_tokens(24, 5);
    const auto plain = logits_of(kF16, ids);
    GgufEdit all;
    all.set_u32 = {{"deepseek2.expert_group_count", 4}, {"deepseek2.expert_group_used_count", 4}};
    EXPECT_EQ(logits_of(write_variant(kF16, "groups-all", all), ids), plain);
    GgufEdit one;
    one.set_u32 = {{"deepseek2.expert_group_count", 4}, {"deepseek2.expert_group_used_count", 1}};
    const std::string path = write_variant(kF16, "groups-one", one);
    EXPECT_NE(logits_of(path, ids), plain);
    expect_batch_invariant(path, ids, {{5, 1}});
}

TEST(Deepseek2BadInput, ContradictingKeysNameTheKeyOrTensor) {
    GgufEdit rank;  // the latent rank attn_kv_a_mqa's rows disagree with
    rank.set_u32 = {{"deepseek2.attention.kv_lora_rank", 32}};
    expect_load_error(write_variant(kF16, "kv-lora-32", rank),
                      {"blk.0.attn_kv_a_mqa.weight", "shape"});
    GgufEdit groups;
    groups.set_u32 = {{"deepseek2.expert_group_count", 3},
                      {"deepseek2.expert_group_used_count", 1}};
    expect_load_error(write_variant(kF16, "groups-3", groups),
                      {"deepseek2.expert_group_count", "does not divide expert_count"});
    GgufEdit too_few;  // one group of 2 experts cannot hold the top 2... of 4 used
    too_few.set_u32 = {{"deepseek2.expert_group_count", 4},
                       {"deepseek2.expert_group_used_count", 1},
                       {"deepseek2.expert_used_count", 4}};
    expect_load_error(write_variant(kF16, "groups-few", too_few),
                      {"deepseek2.expert_group_used_count", "fewer than"});
    GgufEdit mqa;  // mainline llama.cpp's split attn_k_b / attn_v_b form
    mqa.set_u32 = {{"deepseek2.attention.head_count_kv", 1}};
    expect_load_error(write_variant(kF16, "mqa", mqa), {"deepseek2.attention.head_count_kv"});
    GgufEdit gating;
    gating.set_u32 = {{"deepseek2.expert_gating_func", 3}};
    expect_load_error(write_variant(kF16, "gating3", gating),
                      {"deepseek2.expert_gating_func", "out of range"});
    GgufEdit rope;
    rope.set_u32 = {{"deepseek2.rope.dimension_count", 64}};
    expect_load_error(write_variant(kF16, "rope64", rope), {"deepseek2.rope.dimension_count"});
    GgufEdit no_kvb;
    no_kvb.drop_tensor = "blk.2.attn_kv_b.weight";
    expect_load_error(write_variant(kF16, "no-kvb", no_kvb),
                      {"missing tensor", "blk.2.attn_kv_b.weight"});
}

}  // namespace
