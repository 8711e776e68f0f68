// gpt-oss beyond parity (test_model_parity_arch checks the logits against ik_llama.cpp): the
// hyperparameters as the file writes them (sliding window on even layers, YaRN, MXFP4 experts), a
// pass over b tokens gives bit-identical logits to b one-token passes across the window edge,
// greedy speculative decoding equals plain decoding (drafts rejected and rolled back across the
// window edge, and accepted), and files whose metadata contradicts their tensors fail to load with
// an Error naming the key or tensor and the file. Uses the small file of tests/data/arch
// (scripts/models/arch_gpt_oss.py) and modified copies of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/session.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

namespace {

using namespace specula::test;

using specula::Model;
using specula::Session;
using specula::SessionParams;
using specula::token_id;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kStem = "rand-gpt-oss-e8x4-tok512-d256-l2-MXFP4";
const std::string kGptOss = kDir + kStem + ".gguf";
const std::string kQwen3Draft = kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf";

TEST(GptOss, HyperparametersAsWritten) {
    const auto m = Model::load(kGptOss);
    const auto& hp = m->hparams();
    EXPECT_EQ(hp.arch, "gpt-oss");
    EXPECT_EQ(hp.head_dim, 64);
    EXPECT_EQ(hp.n_rot, 64);
    EXPECT_TRUE(hp.rope_neox);
    EXPECT_TRUE(hp.rope_yarn);
    EXPECT_EQ(hp.n_ctx_orig, 4096);
    EXPECT_FLOAT_EQ(hp.rope_freq_scale, 1.0f / 32);
    EXPECT_EQ(hp.n_swa, 8);
    for (int il = 0; il < hp.n_layer; ++il) EXPECT_EQ(hp.is_swa(il), il % 2 == 0) << il;
    EXPECT_EQ(hp.n_expert, 8);
    EXPECT_EQ(hp.n_expert_used, 4);
    EXPECT_EQ(hp.n_ff_expert, 64);
    EXPECT_EQ(hp.moe_routing, specula::HParams::MoeRouting::TopKSoftmax);
    EXPECT_EQ(hp.moe_act, specula::HParams::MoeAct::SwigluOai);
    for (const auto& l : m->layers) {
        EXPECT_EQ(l.ffn_gate_exps.type, specula::GGMLType::MXFP4);
        EXPECT_EQ(l.ffn_down_exps.type, specula::GGMLType::MXFP4);
        EXPECT_NE(l.attn_sinks, nullptr);
        EXPECT_NE(l.ffn_down_exps_b, nullptr);
        EXPECT_NE(l.bq, nullptr);
    }
}

// 40 tokens (five windows of 8; layer 0 has the window, layer 1 none) in passes of every shape give
// each row the bits of one token at a time, on 1 and 2 threads.
TEST(GptOss, BatchOfTokensEqualsOneAtATime) {
    expect_batch_invariant(kGptOss, random_tokens(40, 7), {{9}, {5, 1, 3}, {16, 2}});
}

// Greedy speculative decoding gives the plain tokens: with the qwen3 1-layer draft (same tok512
// vocabulary; its drafts are mostly rejected, so the target rolls back across the window edge)
// and with the target as its own draft (every draft accepted).
TEST(GptOss, GreedySpeculativeEqualsPlain) {
    using namespace specula;
    auto target = Model::load(kGptOss);
    auto self_draft = Model::load(kGptOss);
    auto qwen3_draft = Model::load(kQwen3Draft);
    Session session(*target, SessionParams{0, 1});
    SamplingParams greedy;
    greedy.temp = 0.f;
    auto run = [&](Drafter* drafter, const std::vector<token_id>& prompt, int n_draft,
                   SpecStats* st) {
        Sampler sampler(greedy);
        GenParams gp;
        gp.n_predict = 32;
        gp.ignore_eos = true;
        gp.n_draft = n_draft;
        return generate_tokens(session, sampler, drafter, prompt, gp, st);
    };
    const auto ref = nlohmann::json::parse(test::read_file(kDir + kStem + ".json"));
    int n_prompts = 0;
    for (const auto& p : ref["prompts"]) {
        if (++n_prompts > 3) break;
        const auto prompt = p["token_ids"].get<std::vector<token_id>>();
        const auto plain = run(nullptr, prompt, 0, nullptr);
        ASSERT_EQ(int(plain.size()), 32);
        for (const Model* dm : {qwen3_draft.get(), self_draft.get()}) {
            DraftModelParams dp;
            dp.n_threads = 1;
            dp.sampling = greedy;
            DraftModelDrafter drafter(*dm, dp);
            for (int n : {1, 3, 8}) {
                SpecStats st;
                EXPECT_EQ(run(&drafter, prompt, n, &st), plain)
                    << "prompt " << p["name"] << ", draft " << dm->hparams().arch << ", N=" << n;
                if (dm == self_draft.get()) {
                    EXPECT_LT(st.n_target_passes, 32);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input, on modified copies.

TEST(GptOssBadInput, MissingTensorsNameTheTensor) {
    for (const char* name :
         {"blk.1.attn_sinks.weight", "blk.0.attn_q.bias", "blk.1.ffn_down_exps.bias",
          "blk.1.ffn_gate_inp.bias", "blk.0.post_attention_norm.weight"}) {
        GgufEdit ed;
        ed.drop_tensor = name;
        expect_load_error(write_variant(kGptOss, std::string("no-") + name, ed),
                          {"missing tensor", name});
    }
}

TEST(GptOssBadInput, MetadataThatContradictsTheTensorsNamesTheTensor) {
    GgufEdit ed;
    ed.set_u32 = {{"gpt-oss.expert_count", 16}};
    expect_load_error(write_variant(kGptOss, "e16", ed), {"blk.0.ffn_gate_inp.weight", "shape"});
    GgufEdit ed2;
    ed2.set_u32 = {{"gpt-oss.attention.head_count", 8}};  // 8 sinks, Q of 512 rows
    expect_load_error(write_variant(kGptOss, "h8", ed2), {"blk.0.attn_q.weight", "shape"});
    GgufEdit ed3;
    ed3.set_u32 = {{"gpt-oss.expert_feed_forward_length", 96}};
    expect_load_error(write_variant(kGptOss, "ff96", ed3), {"blk.0.ffn_gate_exps.weight", "shape"});
}

TEST(GptOssBadInput, MissingOrBadKeysNameTheKey) {
    GgufEdit ed;
    ed.drop_keys = {"gpt-oss.attention.sliding_window"};
    expect_load_error(write_variant(kGptOss, "no-swa", ed), {"gpt-oss.attention.sliding_window"});
    GgufEdit ed2;
    ed2.drop_keys = {"gpt-oss.expert_count", "gpt-oss.expert_used_count"};
    expect_load_error(write_variant(kGptOss, "no-experts", ed2), {"gpt-oss.expert_count"});
    GgufEdit ed3;
    ed3.set_str = {{"gpt-oss.rope.scaling.type", "longrope"}};
    expect_load_error(write_variant(kGptOss, "longrope", ed3),
                      {"gpt-oss.rope.scaling.type", "longrope"});
    GgufEdit ed4;
    ed4.set_u32 = {{"gpt-oss.rope.scaling.original_context_length", 0}};
    expect_load_error(write_variant(kGptOss, "orig0", ed4),
                      {"rope.scaling.original_context_length"});
}

}  // namespace
