// glm4moe beyond parity (test_model_parity_arch checks the main pass's logits and
// test_mtp_parity the nextn head's against ik_llama.cpp): the hyperparameters as written, a split
// of the tokens into passes changes no bit (the dense leading layer, the sigmoid-routed experts
// and the shared one), the MTP head from a sidecar gives the embedded head's rows, greedy
// speculative decoding equals plain decoding with the file's own MTP head, with its 1-layer
// draft and with n-gram lookup, and files whose routing keys contradict their tensors fail to
// load with an Error naming the key and the file. Uses the small files of tests/data/arch
// (scripts/models/arch_glm4moe.py) and edited copies of them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/session.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/mtp_drafter.h"
#include "speculative/drafters/ngram_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

namespace {

using namespace specula;
using namespace specula::test;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kMtpStem = "rand-glm4moe-mtp1-e8x2-tok512-d128-l3-F16";
const std::string kMtp = kDir + kMtpStem + ".gguf";
const std::string kQ8 = kDir + "rand-glm4moe-e8x2-tok512-d128-l3-Q8_0.gguf";
const std::string kDraft = kDir + "rand-glm4moe-tok512-d128-l1-draft-Q8_0.gguf";

// One thread: the models are tiny, and tests share a small machine.
SessionParams one_thread(int n_ctx) {
    SessionParams sp;
    sp.n_ctx = n_ctx;
    sp.n_threads = 1;
    return sp;
}

TEST(Glm4Moe, HyperparametersAsWritten) {
    const auto m = Model::load(kMtp);
    const HParams& hp = m->hparams();
    EXPECT_EQ(hp.arch, "glm4moe");
    EXPECT_EQ(hp.n_layer, 3);  // block_count 4, the last the MTP layer
    EXPECT_EQ(hp.n_nextn, 1);
    EXPECT_TRUE(m->has_mtp());
    EXPECT_EQ(hp.head_dim, 64);
    EXPECT_EQ(hp.n_rot, 32);  // partial rotary
    EXPECT_TRUE(hp.rope_neox);
    EXPECT_EQ(hp.n_expert, 8);
    EXPECT_EQ(hp.n_expert_used, 2);
    EXPECT_EQ(hp.n_ff_expert, 32);
    EXPECT_EQ(hp.n_ff_shexp, 32);  // one shared expert
    EXPECT_EQ(hp.n_layer_dense_lead, 1);
    EXPECT_TRUE(hp.moe_sigmoid);
    EXPECT_TRUE(hp.moe_norm_w);
    EXPECT_FLOAT_EQ(hp.moe_w_scale, 2.5f);
    // Layer 0 dense, the others and the head MoE with the selection bias and the shared expert.
    EXPECT_TRUE(m->layers[0].ffn_gate.data && !m->layers[0].ffn_gate_inp);
    for (const LayerWeights* l : {&m->layers[1], &m->layers[2], &m->mtp.layer}) {
        EXPECT_TRUE(l->ffn_gate_inp && l->ffn_exp_probs_b && l->ffn_up_shexp.data);
        EXPECT_FALSE(l->ffn_gate_inp_shexp);  // GLM's shared expert is ungated
        EXPECT_TRUE(l->bq && l->bk && l->bv && l->q_norm && l->k_norm);
    }
    const auto q8 = Model::load(kQ8);
    EXPECT_FALSE(q8->has_mtp());
    EXPECT_FALSE(q8->layers[1].q_norm);  // GLM-4.5-Air's attention: no Q/K norms
}

TEST(Glm4Moe, PassesOfAnySizeGiveTheSameLogits) {
    for (const auto& path : {kMtp, kQ8})
        expect_batch_invariant(path, random_tokens(40, 7), {{9}, {5, 1, 3}});
}

// The MTP layer split off into a sidecar (blk.3.* with the file's keys) and the trunk (block_count
// 3, no nextn key): the trunk with the sidecar (LoadOptions::mtp_sidecar, bind_mtp) gives the
// head rows of the file with its own layer, bit for bit.
TEST(Glm4Moe, MtpSidecarEqualsTheEmbeddedHead) {
    const auto src = GGUFFile::open(kMtp);
    GGUFWriter trunk, car;
    for (const auto& [k, v] : src->metadata()) {
        if (k != "glm4moe.nextn_predict_layers") trunk.set(k, v);
        car.set(k, v);
    }
    trunk.set_u32("glm4moe.block_count", 3);
    for (const auto& t : src->tensors())
        (t.name.rfind("blk.3.", 0) == 0 ? car : trunk)
            .add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
    const std::string dir = temp_dir("arch");
    trunk.write(dir + "/glm-trunk.gguf");
    car.write(dir + "/glm-sidecar.gguf");
    LoadOptions lo;
    lo.mtp_sidecar = dir + "/glm-sidecar.gguf";
    const auto whole = Model::load(kMtp);
    const auto split = Model::load(dir + "/glm-trunk.gguf", lo);
    ASSERT_TRUE(split->has_mtp());
    EXPECT_EQ(split->hparams().n_layer, 3);
    const auto ids = random_tokens(20, 3);
    const std::vector<token_id> next(ids.begin() + 1, ids.end());
    const int d = whole->hparams().n_embd, nv = whole->hparams().n_vocab, n = int(next.size());
    std::vector<std::vector<float>> rows;
    for (const Model* m : {whole.get(), split.get()}) {
        Session s(*m, one_thread(128));
        s.eval(ids);
        std::vector<float> h;
        for (int j = 0; j < n; ++j) h.insert(h.end(), s.hidden(j), s.hidden(j) + d);
        s.eval_mtp(next, h.data());
        std::vector<float> out;
        for (int t = 0; t < n; ++t) out.insert(out.end(), s.mtp_logits(t), s.mtp_logits(t) + nv);
        rows.push_back(out);
    }
    EXPECT_EQ(rows[0], rows[1]);
}

SamplingParams greedy() {
    SamplingParams p;
    p.temp = 0.f;
    return p;
}

std::vector<token_id> run(Session& target, Drafter* drafter, const std::vector<token_id>& prompt,
                          int n_draft, SpecStats* st = nullptr) {
    Sampler sampler(greedy());
    GenParams gp;
    gp.n_predict = 32;
    gp.ignore_eos = true;
    gp.n_draft = n_draft;
    return generate_tokens(target, sampler, drafter, prompt, gp, st);
}

std::vector<std::vector<token_id>> prompts(const std::string& stem, size_t n) {
    const auto ref = nlohmann::json::parse(read_file(kDir + stem + ".json"));
    std::vector<std::vector<token_id>> out;
    for (const auto& p : ref["prompts"]) {
        if (out.size() == n) break;
        out.push_back(p["token_ids"].get<std::vector<token_id>>());
    }
    return out;
}

// The head drafts k = 1 (a head pass per proposal) and k > 1 (chained on its own output), the
// 1-layer draft and n-gram lookup: every output equals plain greedy decoding.
TEST(Glm4Moe, GreedySpeculativeEqualsPlainWithEveryDrafter) {
    const auto target = Model::load(kMtp);
    const auto draft = Model::load(kDraft);
    Session session(*target, one_thread(0));
    MtpDrafter mtp(*target, greedy());
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling = greedy();
    DraftModelDrafter d_model(*draft, dp);
    NgramDrafter ngram(NgramParams{});
    for (const auto& prompt : prompts(kMtpStem, 2)) {
        const auto plain = run(session, nullptr, prompt, 0);
        ASSERT_EQ(int(plain.size()), 32);
        for (Drafter* d : {(Drafter*)&mtp, (Drafter*)&d_model, (Drafter*)&ngram}) {
            for (int n : {1, 3, 5}) {
                SpecStats st;
                EXPECT_EQ(run(session, d, prompt, n, &st), plain) << d->name() << ", N=" << n;
                EXPECT_LE(st.n_accepted, st.n_drafted);
                if (d != &ngram) {
                    EXPECT_GT(st.n_drafted, 0) << d->name() << ", N=" << n;
                }
            }
        }
    }
}

TEST(Glm4MoeBadInput, RoutingKeysThatContradictTheTensorsNameTheKey) {
    GgufEdit groups;
    groups.set_u32 = {{"glm4moe.expert_group_count", 3}};
    expect_load_error(write_variant(kMtp, "glm-groups3", groups),
                      {"glm4moe.expert_group_count", "does not divide expert_count"});
    GgufEdit limited;
    limited.set_u32 = {{"glm4moe.expert_group_count", 2}, {"glm4moe.expert_group_used_count", 1}};
    expect_load_error(write_variant(kMtp, "glm-group-limited", limited),
                      {"glm4moe.expert_group_used_count", "group-limited"});
    GgufEdit shared2;
    shared2.set_u32 = {{"glm4moe.expert_shared_count", 2}};
    expect_load_error(write_variant(kMtp, "glm-shared2", shared2),
                      {"glm4moe.expert_shared_count", "blk.1.ffn_gate_shexp.weight", "32 wide"});
    GgufEdit shared0;
    shared0.set_u32 = {{"glm4moe.expert_shared_count", 0}};
    expect_load_error(write_variant(kQ8, "glm-shared0", shared0),
                      {"glm4moe.expert_shared_count", "blk.1.ffn_gate_shexp.weight"});
    GgufEdit dense2;
    dense2.set_u32 = {{"glm4moe.leading_dense_block_count", 2}};
    expect_load_error(write_variant(kQ8, "glm-dense2", dense2),
                      {"glm4moe.leading_dense_block_count", "blk.1.ffn_gate_inp.weight"});
    GgufEdit gating;
    gating.set_u32 = {{"glm4moe.expert_gating_func", 3}};
    expect_load_error(write_variant(kQ8, "glm-gating3", gating),
                      {"glm4moe.expert_gating_func", "out of range"});
    GgufEdit no_scale;
    no_scale.drop_keys = {"glm4moe.expert_weights_scale"};
    expect_load_error(write_variant(kQ8, "glm-no-scale", no_scale),
                      {"missing key", "glm4moe.expert_weights_scale"});
}

// nextn_predict_layers must name exactly the layers with nextn tensors: 0 would run the MTP
// layer as a main one, 2 would make layer 2 (no nextn tensors) an MTP layer.
TEST(Glm4MoeBadInput, NextnCountThatContradictsTheTensorsNamesTheKey) {
    for (uint32_t n : {0u, 2u}) {
        GgufEdit ed;
        ed.set_u32 = {{"glm4moe.nextn_predict_layers", n}};
        expect_load_error(write_variant(kMtp, "glm-nextn" + std::to_string(n), ed),
                          {"glm4moe.nextn_predict_layers", "nextn"});
    }
    GgufEdit no_proj;
    no_proj.drop_tensor = "blk.3.nextn.eh_proj.weight";
    expect_load_error(write_variant(kMtp, "glm-no-eh-proj", no_proj),
                      {"blk.3.nextn.eh_proj.weight"});
}

}  // namespace
