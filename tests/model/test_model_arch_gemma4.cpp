// gemma4 beyond parity (test_model_parity_arch checks the logits against ik_llama.cpp): the
// per-layer shapes, shared KV and rope the file implies, a pass over b tokens gives bit-identical
// logits to b one-token passes across the sliding window's edge, the cache keeps rows only for
// the layers that own them (each of its own width) and the memory plan counts exactly that, and
// files whose metadata contradicts their tensors fail with an Error naming the key and the file.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "model/session.h"
#include "model/state/kv_cache.h"
#include "model/state/sequence_state.h"
#include "test_util.h"

namespace {

using namespace specula::test;

using specula::KVCache;
using specula::KVType;
using specula::Model;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kGemma4 = kDir + "rand-gemma4-tok512-d128-l6-F16.gguf";
const std::string kGemma4Q8 = kDir + "rand-gemma4-tok512-d128-l6-Q8_0.gguf";
const std::string kGemma4Moe = kDir + "rand-gemma4moe-e8x2-tok512-d128-l4-F16.gguf";

TEST(Gemma4, HyperparametersAsWritten) {
    const auto m = Model::load(kGemma4);
    const auto& hp = m->hparams();
    EXPECT_EQ(hp.arch, "gemma4");
    const std::vector<int> swa = {1, 1, 1, 0, 1, 0};
    for (int il = 0; il < hp.n_layer; ++il) {
        EXPECT_EQ(hp.is_swa(il), swa[size_t(il)] != 0) << il;
        EXPECT_EQ(hp.layer_head_dim(il), swa[size_t(il)] ? 32 : 64) << il;
        EXPECT_EQ(hp.layer_n_head_kv(il), swa[size_t(il)] ? 2 : 1) << il;
        EXPECT_EQ(hp.layer_n_rot(il), swa[size_t(il)] ? 32 : 64) << il;
        EXPECT_EQ(hp.layer_n_ff(il), il >= 4 ? 192 : 96) << il;  // double-wide where KV is shared
    }
    // The last two layers read the caches of the last earlier layer of their kind.
    EXPECT_EQ(hp.kv_layer(4), 2);
    EXPECT_EQ(hp.kv_layer(5), 3);
    for (int il = 0; il < 4; ++il) EXPECT_TRUE(hp.own_kv(il)) << il;
    EXPECT_FLOAT_EQ(hp.attn_scale, 1.f);
    EXPECT_FLOAT_EQ(hp.final_softcap, 30.f);
    EXPECT_FLOAT_EQ(hp.rope_freq_base, 1e6f);
    EXPECT_FLOAT_EQ(hp.rope_freq_base_swa, 1e4f);
    EXPECT_FALSE(hp.swa_rope_factors);
    EXPECT_EQ(hp.n_embd_per_layer, 32);
    EXPECT_EQ(m->rope_freq_factors.size(), 32u);  // the full layers' head of 64 / 2
    // The full layers have no attn_v (V = K); the shared ones no K of their own.
    EXPECT_EQ(m->layers[3].wv.data, nullptr);
    EXPECT_NE(m->layers[2].wv.data, nullptr);
    EXPECT_EQ(m->layers[4].wk.data, nullptr);
}

TEST(Gemma4, MoeVariantAsWritten) {
    const auto m = Model::load(kGemma4Moe);
    const auto& hp = m->hparams();
    EXPECT_EQ(hp.n_expert, 8);
    EXPECT_EQ(hp.n_expert_used, 2);
    EXPECT_EQ(hp.n_ff_expert, 64);
    EXPECT_TRUE(hp.moe_dense_ffn);
    EXPECT_EQ(hp.moe_act, specula::HParams::MoeAct::Gelu);
    for (const auto& l : m->layers) {
        EXPECT_NE(l.ffn_gate_up_exps.data, nullptr);
        EXPECT_NE(l.ffn_down_exps_s, nullptr);
        EXPECT_NE(l.ffn_gate.data, nullptr);  // the dense FFN beside the experts
    }
    // The router's input scale carries 1 / sqrt(n_embd) (folded in at load, as ik_llama.cpp).
    const auto f = specula::GGUFFile::open(kGemma4Moe);
    const auto& t = f->tensor("blk.0.ffn_gate_inp.scale");
    const float* raw = reinterpret_cast<const float*>(t.data);
    EXPECT_FLOAT_EQ(m->layers[0].ffn_gate_inp_s[3], raw[3] / std::sqrt(128.0f));
}

TEST(Gemma4, BatchOfTokensEqualsOneAtATime) {
    // 48 tokens: three times the window of 16, so passes start before, at and after its edge.
    for (const std::string& path : {kGemma4, kGemma4Q8, kGemma4Moe})
        expect_batch_invariant(path, random_tokens(48, 7), {{9}, {5, 1, 3}, {16, 2}, {17}});
}

TEST(Gemma4, CacheHoldsOnlyTheLayersThatOwnOne) {
    const auto m = Model::load(kGemma4);
    const auto& hp = m->hparams();
    const auto shapes = specula::kv_shapes(hp);
    const auto windows = specula::kv_windows(hp);
    ASSERT_EQ(windows.size(), 6u);
    EXPECT_EQ(windows[4], -1);  // shared: no rows
    EXPECT_EQ(windows[5], -1);
    EXPECT_EQ(windows[3], 0);  // full
    EXPECT_EQ(windows[0], 16);
    const int n_ctx = 256, max_pass = 8;
    // Three sliding layers of 2 x 32 in rings of 15 + 8 (rounded up to 32 rows), one full layer of
    // 1 x 64 over 256 rows; F16 K and V: 2 bytes a value, twice.
    const double want = (3.0 * 32 * 64 + 256.0 * 64) * 2 * 2;
    EXPECT_EQ(KVCache::bytes(shapes, n_ctx, KVType::F16, KVType::F16, windows, max_pass), want);
    KVCache kv(shapes, n_ctx, KVType::F16, KVType::F16, windows, max_pass);
    EXPECT_EQ(kv.rows(4), 0);
    EXPECT_EQ(kv.rows(3), n_ctx);
    EXPECT_EQ(kv.n_embd_kv(0), 64);
    EXPECT_EQ(kv.n_embd_kv(3), 64);
    EXPECT_EQ(kv.stride(0), 32);  // head-major by the sliding layers' heads
    EXPECT_EQ(kv.stride(3), 64);
    // A row written to layer 0 and to layer 3 reads back (F16-rounded) from its own layer.
    std::vector<float> k(64), v(64), out(64);
    for (int i = 0; i < 64; ++i) k[size_t(i)] = 0.5f * i, v[size_t(i)] = -0.25f * i;
    kv.write(0, 5, k.data(), v.data());
    kv.write(3, 5, v.data(), k.data());
    kv.read_k(0, 5, 0, 64, out.data());
    EXPECT_EQ(out, k);
    kv.read_v(3, 5, 0, 64, out.data());
    EXPECT_EQ(out, k);
}

TEST(Gemma4BadInput, ContradictingKeysNameTheKey) {
    GgufEdit ed;
    ed.set_u32 = {{"gemma4.attention.shared_kv_layers", 6}};
    expect_load_error(write_variant(kGemma4, "shared6", ed),
                      {"gemma4.attention.shared_kv_layers", "out of range"});
    GgufEdit ed2;  // layer 0 slides and would have to share a cache before it
    ed2.set_u32 = {{"gemma4.attention.shared_kv_layers", 5}};
    expect_load_error(write_variant(kGemma4, "shared5", ed2),
                      {"gemma4.attention.shared_kv_layers", "no earlier layer of its kind"});
    GgufEdit ed3;
    ed3.drop_keys = {"gemma4.attention.key_length_swa"};
    expect_load_error(write_variant(kGemma4, "no-swa-hd", ed3),
                      {"missing key", "gemma4.attention.key_length_swa"});
    GgufEdit ed4;
    ed4.set_u32 = {{"gemma4.expert_count", 4}, {"gemma4.expert_used_count", 2}};
    expect_load_error(write_variant(kGemma4, "experts", ed4),
                      {"gemma4.expert_count", "no layer has experts"});
    GgufEdit ed5;  // a per-layer FFN width of one value: the double-wide layers' tensors disagree
    ed5.set_u32 = {{"gemma4.feed_forward_length", 96}};
    expect_load_error(write_variant(kGemma4, "ff96", ed5), {"blk.4.ffn_gate.weight", "shape"});
    GgufEdit ed6;
    ed6.drop_tensor = "blk.2.attn_k_norm.weight";
    expect_load_error(write_variant(kGemma4, "no-knorm", ed6),
                      {"missing tensor", "blk.2.attn_k_norm.weight"});
    GgufEdit ed7;
    ed7.drop_tensor = "per_layer_token_embd.weight";
    expect_load_error(write_variant(kGemma4, "no-ple", ed7),
                      {"missing tensor", "per_layer_token_embd.weight"});
}

}  // namespace
