// qwen3 and qwen3moe beyond parity (test_model_parity_arch checks the logits against
// ik_llama.cpp): a pass over b tokens gives bit-identical logits to b one-token passes (and to
// any split of them; for qwen3moe the pass groups its tokens by expert), and files whose metadata
// contradicts their tensors fail to load with an Error naming the key or tensor and the file.
// Uses the small files of tests/data/arch and modified copies of them.
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
#include "model/blocks/moe.h"
#include "model/session.h"
#include "test_util.h"

namespace {

using namespace specula::test;

using specula::Model;
using specula::Session;
using specula::SessionParams;
using specula::token_id;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kQwen3 = kDir + "rand-qwen3-tok512-d256-l2-Q8_0.gguf";
const std::string kQwen3F16 = kDir + "rand-qwen3-tok512-d256-l2-F16.gguf";
const std::string kQwen3Moe = kDir + "rand-qwen3moe-e8x4-tok512-d256-l2-Q8_0.gguf";

const std::vector<std::vector<int>> kSplits = {{9}, {5, 1, 3}, {16, 2}};

TEST(Qwen3, BatchOfTokensEqualsOneAtATime) {
    expect_batch_invariant(kQwen3, random_tokens(40, 7), kSplits);
    expect_batch_invariant(kQwen3F16, random_tokens(40, 7), kSplits);
}

TEST(Qwen3Moe, BatchOfTokensEqualsOneAtATime) {
    expect_batch_invariant(kQwen3Moe, random_tokens(40, 7), kSplits);
}

// The MoE FFN groups a pass's tokens by expert: 9 tokens choosing 4 of 8 experts each run at
// most 8 experts (each once, over all its tokens), not 36 token-expert products; and each token's
// output is bit-identical to running it alone.
TEST(Qwen3Moe, PassRunsEachChosenExpertOnce) {
    const auto m = Model::load(kQwen3Moe);
    const auto& hp = m->hparams();
    const int d = hp.n_embd, ntok = 9;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    std::vector<float> x(size_t(ntok) * d), out(x.size()), one(d);
    for (auto& v : x) v = nd(rng);
    specula::ThreadPool pool(2);
    specula::MatmulScratch scratch;
    specula::MoeFFN moe;
    for (int il = 0; il < hp.n_layer; ++il) {
        const auto& l = m->layers[size_t(il)];
        moe.forward(l, hp, x.data(), ntok, out.data(), pool, scratch);
        EXPECT_GE(moe.experts_run(), hp.n_expert_used);
        EXPECT_LE(moe.experts_run(), hp.n_expert);
        for (int t = 0; t < ntok; ++t) {
            moe.forward(l, hp, x.data() + size_t(t) * d, 1, one.data(), pool, scratch);
            EXPECT_EQ(moe.experts_run(), hp.n_expert_used) << "one token runs its k experts";
            EXPECT_EQ(0, std::memcmp(one.data(), out.data() + size_t(t) * d, sizeof(float) * d))
                << "layer " << il << ", token " << t << " differs from running it alone";
        }
    }
}

TEST(Qwen3, HyperparametersAsWritten) {
    const auto m = Model::load(kQwen3);
    const auto& hp = m->hparams();
    EXPECT_EQ(hp.arch, "qwen3");
    EXPECT_EQ(hp.head_dim, 96);  // attention.key_length: wider than n_embd / n_head = 64
    EXPECT_EQ(hp.n_rot, 96);
    EXPECT_TRUE(hp.rope_neox);
    EXPECT_EQ(hp.n_expert, 0);
    const auto moe = Model::load(kQwen3Moe);
    EXPECT_EQ(moe->hparams().arch, "qwen3moe");
    EXPECT_EQ(moe->hparams().n_expert, 8);
    EXPECT_EQ(moe->hparams().n_expert_used, 4);
    EXPECT_EQ(moe->hparams().n_ff_expert, 64);
    EXPECT_EQ(moe->hparams().n_ff, 256);
}

// ---------------------------------------------------------------------------------------------
// Bad input, on modified copies.

TEST(Qwen3BadInput, MissingQNormNamesTensorAndFile) {
    GgufEdit ed;
    ed.drop_tensor = "blk.1.attn_q_norm.weight";
    expect_load_error(write_variant(kQwen3, "no-qnorm", ed),
                      {"missing tensor", "blk.1.attn_q_norm.weight"});
    ed.drop_tensor = "blk.0.attn_k_norm.weight";
    expect_load_error(write_variant(kQwen3Moe, "moe-no-knorm", ed),
                      {"missing tensor", "blk.0.attn_k_norm.weight"});
}

TEST(Qwen3BadInput, HeadCountThatDoesNotDivideNamesTheKey) {
    GgufEdit ed;
    ed.set_u32 = {{"qwen3.attention.head_count_kv", 3}};  // 4 heads over 3 KV heads
    expect_load_error(write_variant(kQwen3, "kv3", ed),
                      {"qwen3.attention.head_count", "head_count_kv"});
    // Without attention.key_length the head size is embedding_length / head_count: 256 / 3.
    GgufEdit ed2;
    ed2.drop_keys = {"qwen3.attention.key_length"};
    ed2.set_u32 = {{"qwen3.attention.head_count", 3}, {"qwen3.attention.head_count_kv", 3}};
    expect_load_error(write_variant(kQwen3, "heads3", ed2),
                      {"qwen3.embedding_length", "attention.head_count"});
}

TEST(Qwen3BadInput, HeadSizeThatContradictsTheTensorsNamesTheTensor) {
    GgufEdit ed;
    ed.set_u32 = {{"qwen3.attention.key_length", 64}, {"qwen3.attention.value_length", 64}};
    expect_load_error(write_variant(kQwen3, "hd64", ed), {"blk.0.attn_q.weight", "shape"});
}

TEST(Qwen3BadInput, ExpertCountThatContradictsTheTensorsNamesTheTensor) {
    GgufEdit ed;
    ed.set_u32 = {{"qwen3moe.expert_count", 16}};
    expect_load_error(write_variant(kQwen3Moe, "e16", ed), {"blk.0.ffn_gate_inp.weight", "shape"});
    GgufEdit ed2;
    ed2.set_u32 = {{"qwen3moe.expert_feed_forward_length", 128}};
    expect_load_error(write_variant(kQwen3Moe, "ff128", ed2),
                      {"blk.0.ffn_gate_exps.weight", "shape"});
}

TEST(Qwen3BadInput, MoeKeysOnTheWrongArchitecture) {
    GgufEdit ed;
    ed.drop_keys = {"qwen3moe.expert_count", "qwen3moe.expert_used_count"};
    expect_load_error(write_variant(kQwen3Moe, "no-experts", ed), {"qwen3moe.expert_count"});
    GgufEdit ed2;
    ed2.set_bool = {{"qwen3moe.expert_weights_norm", false}};
    expect_load_error(write_variant(kQwen3Moe, "no-norm", ed2), {"qwen3moe.expert_weights_norm"});
    GgufEdit ed3;
    ed3.set_u32 = {{"qwen3.expert_count", 8}, {"qwen3.expert_used_count", 2}};
    expect_load_error(write_variant(kQwen3, "dense-experts", ed3), {"qwen3.expert_count"});
}

TEST(Qwen3BadInput, UnknownArchitectureListsSupportedOnes) {
    GgufEdit ed;
    ed.set_str = {{"general.architecture", "qwen4"}};
    expect_load_error(write_variant(kQwen3, "qwen4", ed),
                      {"unsupported architecture 'qwen4'", "llama", "qwen2", "qwen3", "qwen3moe"});
}

}  // namespace
