// gpt-oss beyond parity (test_model_parity_arch checks the logits against ik_llama.cpp): the
// hyperparameters as the file writes them (sliding window on even layers, YaRN, MXFP4 experts), a
// pass over b tokens gives bit-identical logits to b one-token passes across the window edge,
// greedy speculative decoding equals plain decoding (drafts rejected and rolled back across the
// window edge, and accepted), and files whose metadata contradicts their tensors fail to load with
// an Error naming the key or tensor and the file. Uses the small file of tests/data/arch
// (scripts/models/make_gpt_oss_models.py) and modified copies of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/session.h"
#include "speculative/draft_model_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

namespace {

using specula::Model;
using specula::Session;
using specula::SessionParams;
using specula::token_id;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kStem = "rand-gpt-oss-e8x4-tok512-d256-l2-MXFP4";
const std::string kGptOss = kDir + kStem + ".gguf";
const std::string kQwen3Draft = kDir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf";

std::vector<token_id> random_tokens(int n, int seed) {
    std::mt19937 rng(seed);
    std::vector<token_id> t(n);
    for (auto& x : t) x = token_id(rng() % 512);
    return t;
}

// Evaluates `ids` in passes of the given sizes (all logits) and returns every row.
std::vector<float> run_split(const Model& m, const std::vector<token_id>& ids,
                             const std::vector<int>& sizes, int n_threads) {
    Session s(m, SessionParams{128, n_threads});
    const int nv = m.hparams().n_vocab;
    std::vector<float> out;
    size_t at = 0;
    for (size_t i = 0; at < ids.size(); ++i) {
        const int n = std::min<int>(sizes[i % sizes.size()], int(ids.size() - at));
        s.eval(std::span<const token_id>(ids.data() + at, n));
        for (int r = 0; r < n; ++r) out.insert(out.end(), s.logits(r), s.logits(r) + nv);
        at += n;
    }
    return out;
}

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
    const auto m = Model::load(kGptOss);
    const auto ids = random_tokens(40, 7);
    const auto one = run_split(*m, ids, {1}, 1);
    for (const auto& sizes : std::vector<std::vector<int>>{{40}, {9}, {5, 1, 3}, {16, 2}}) {
        for (int threads : {1, 2}) {
            const auto got = run_split(*m, ids, sizes, threads);
            ASSERT_EQ(got.size(), one.size());
            EXPECT_EQ(0, std::memcmp(got.data(), one.data(), one.size() * sizeof(float)))
                << "passes of " << sizes[0] << ".. tokens (" << threads
                << " threads) differ from one token at a time";
        }
    }
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
                if (dm == self_draft.get()) EXPECT_LT(st.n_target_passes, 32);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input, on modified copies.

struct Edit {
    std::string drop_tensor;
    std::vector<std::string> drop_keys;
    std::vector<std::pair<std::string, uint32_t>> set_u32;
    std::vector<std::pair<std::string, std::string>> set_str;
};

std::string write_variant(const std::string& tag, const Edit& ed) {
    const auto src = specula::GGUFFile::open(kGptOss);
    specula::GGUFWriter w;
    for (const auto& [k, v] : src->metadata()) {
        if (std::find(ed.drop_keys.begin(), ed.drop_keys.end(), k) == ed.drop_keys.end())
            w.set(k, v);
    }
    for (const auto& [k, v] : ed.set_u32) w.set_u32(k, v);
    for (const auto& [k, v] : ed.set_str) w.set_string(k, v);
    for (const auto& t : src->tensors()) {
        if (t.name != ed.drop_tensor) w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
    }
    const std::string path = specula::test::temp_dir("gpt_oss") + "/" + tag + ".gguf";
    w.write(path);
    return path;
}

void expect_load_error(const std::string& path, const std::vector<std::string>& needles) {
    try {
        Model::load(path);
        ADD_FAILURE() << path << ": loaded without error";
    } catch (const specula::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << "names the file: " << msg;
        for (const auto& n : needles) {
            EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
        }
    }
}

TEST(GptOssBadInput, MissingTensorsNameTheTensor) {
    for (const char* name :
         {"blk.1.attn_sinks.weight", "blk.0.attn_q.bias", "blk.1.ffn_down_exps.bias",
          "blk.1.ffn_gate_inp.bias", "blk.0.post_attention_norm.weight"}) {
        Edit ed;
        ed.drop_tensor = name;
        expect_load_error(write_variant(std::string("no-") + name, ed), {"missing tensor", name});
    }
}

TEST(GptOssBadInput, MetadataThatContradictsTheTensorsNamesTheTensor) {
    Edit ed;
    ed.set_u32 = {{"gpt-oss.expert_count", 16}};
    expect_load_error(write_variant("e16", ed), {"blk.0.ffn_gate_inp.weight", "shape"});
    Edit ed2;
    ed2.set_u32 = {{"gpt-oss.attention.head_count", 8}};  // 8 sinks, Q of 512 rows
    expect_load_error(write_variant("h8", ed2), {"blk.0.attn_q.weight", "shape"});
    Edit ed3;
    ed3.set_u32 = {{"gpt-oss.expert_feed_forward_length", 96}};
    expect_load_error(write_variant("ff96", ed3), {"blk.0.ffn_gate_exps.weight", "shape"});
}

TEST(GptOssBadInput, MissingOrBadKeysNameTheKey) {
    Edit ed;
    ed.drop_keys = {"gpt-oss.attention.sliding_window"};
    expect_load_error(write_variant("no-swa", ed), {"gpt-oss.attention.sliding_window"});
    Edit ed2;
    ed2.drop_keys = {"gpt-oss.expert_count", "gpt-oss.expert_used_count"};
    expect_load_error(write_variant("no-experts", ed2), {"gpt-oss.expert_count"});
    Edit ed3;
    ed3.set_str = {{"gpt-oss.rope.scaling.type", "longrope"}};
    expect_load_error(write_variant("longrope", ed3), {"gpt-oss.rope.scaling.type", "longrope"});
    Edit ed4;
    ed4.set_u32 = {{"gpt-oss.rope.scaling.original_context_length", 0}};
    expect_load_error(write_variant("orig0", ed4), {"rope.scaling.original_context_length"});
}

}  // namespace
