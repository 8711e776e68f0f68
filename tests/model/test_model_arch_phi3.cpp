// phi3 and mistral3 beyond parity (test_model_parity_arch checks their logits against
// ik_llama.cpp): a pass over b tokens gives bit-identical logits to b one-token passes, and a
// BatchEvaluator pass over sessions of different contexts those of each session alone; greedy
// speculative decoding equals plain decoding (with the phi3 1-layer draft, rollback across the
// sliding window's edge included), the sliding window hides what lies beyond it, LongRoPE picks
// its factors by the session's context, the hyperparameters of Phi-4-, Phi-3- and
// Ministral-3-shaped metadata read as ik_llama.cpp reads them, and files whose metadata or fused
// tensors are wrong fail with an Error naming the key or tensor and the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/batch_eval.h"
#include "model/load/arch.h"
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
// Phi-3.5-mini-like: LongRoPE factors (original context 256), sliding window 24.
const std::string kPhi3Swa = kDir + "rand-phi3-swa-longrope-tok512-d192-l2-F16.gguf";
// Phi-4-like: no window, no rope factors; and its 1-layer draft.
const std::string kPhi4 = kDir + "rand-phi3-tok512-d192-l2-Q8_0.gguf";
const std::string kPhiDraft = kDir + "rand-phi3-tok512-d192-l1-draft-Q8_0.gguf";
const std::string kMistral3 = kDir + "rand-mistral3-yarn-tok512-d192-l2-Q8_0.gguf";

// 70 tokens: beyond the window (24) and the attention temperature's 64.
void expect_phi_batch_invariant(const std::string& path) {
    expect_batch_invariant(path, random_tokens(70, 7), {{9}, {5, 1, 3}, {16, 2}}, 512);
}

TEST(Phi3, BatchOfTokensEqualsOneAtATime) {
    expect_phi_batch_invariant(kPhi3Swa);
    expect_phi_batch_invariant(kPhi4);
}

TEST(Mistral3, BatchOfTokensEqualsOneAtATime) {
    expect_phi_batch_invariant(kMistral3);
}

// Two layers of a 24-position window see 2 * 23 positions back: a token further back changes
// nothing (bit for bit), a nearer one changes the logits.
TEST(Phi3, SlidingWindowHidesOlderTokens) {
    const auto m = Model::load(kPhi3Swa);
    ASSERT_EQ(m->hparams().n_swa, 24);
    const int nv = m->hparams().n_vocab;
    auto a = random_tokens(64, 11);
    auto b = a;
    for (int i = 0; i < 6; ++i) b[size_t(i)] = token_id((a[size_t(i)] + 1 + i) % 512);
    const auto la = run_split(*m, a, {64}, 1, 512);
    const auto lb = run_split(*m, b, {64}, 1, 512);
    auto row = [&](const std::vector<float>& l, int p) { return l.data() + size_t(p) * nv; };
    EXPECT_EQ(0, std::memcmp(row(la, 63), row(lb, 63), sizeof(float) * nv)) << "position 63";
    EXPECT_EQ(0, std::memcmp(row(la, 52), row(lb, 52), sizeof(float) * nv)) << "position 52";
    EXPECT_NE(0, std::memcmp(row(la, 20), row(lb, 20), sizeof(float) * nv)) << "position 20";
    // Without the window (the Phi-4 file: the same shapes) every position sees token 0.
    const auto m4 = Model::load(kPhi4);
    ASSERT_EQ(m4->hparams().n_swa, 0);
    const auto l4a = run_split(*m4, a, {64}, 1, 512);
    const auto l4b = run_split(*m4, b, {64}, 1, 512);
    EXPECT_NE(0, std::memcmp(row(l4a, 63), row(l4b, 63), sizeof(float) * nv));
}

// LongRoPE: a context beyond original_context_length (256) uses the long factors, any other the
// short ones, as ik_llama.cpp chooses them; a file without factors does not care.
TEST(Phi3, LongRopeFactorsFollowTheSessionContext) {
    const auto m = Model::load(kPhi3Swa);
    ASSERT_EQ(m->hparams().n_ctx_orig, 256);
    ASSERT_EQ(m->rope_factors_long.size(), 32u);
    ASSERT_EQ(m->rope_factors_short.size(), 32u);
    const auto ids = random_tokens(12, 5);
    const auto at256 = run_split(*m, ids, {12}, 1, 256);
    const auto at512 = run_split(*m, ids, {12}, 1, 512);
    const auto at1024 = run_split(*m, ids, {12}, 1, 1024);
    EXPECT_NE(at256, at512) << "short and long factors rotate differently";
    EXPECT_EQ(at512, at1024) << "every context beyond 256 uses the long factors";
    const auto m4 = Model::load(kPhi4);
    EXPECT_EQ(run_split(*m4, ids, {12}, 1, 256), run_split(*m4, ids, {12}, 1, 512));
}

// One BatchEvaluator pass over sessions of different contexts (short and long LongRoPE factors)
// and positions (before and beyond the window; mistral3: before and beyond the temperature's 64)
// gives each session the logits it gets alone.
void expect_batch_equals_alone(const std::string& path) {
    const auto m = Model::load(path);
    const int nv = m->hparams().n_vocab;
    specula::ThreadPool pool(2);
    const std::vector<int> ctx = {256, 512, 512};
    const std::vector<int> past = {3, 40, 70};
    std::vector<std::unique_ptr<Session>> together, alone;
    std::vector<std::vector<token_id>> next;
    for (size_t i = 0; i < ctx.size(); ++i) {
        SessionParams sp{ctx[i], 2};
        sp.pool = &pool;
        together.push_back(std::make_unique<Session>(*m, sp));
        alone.push_back(std::make_unique<Session>(*m, sp));
        const auto prompt = random_tokens(past[i], int(i) + 20);
        together.back()->eval(prompt);
        alone.back()->eval(prompt);
        next.push_back(random_tokens(int(i) + 4, int(i) + 30));
    }
    std::vector<specula::BatchItem> items;
    for (size_t i = 0; i < ctx.size(); ++i) items.push_back({together[i].get(), next[i], true});
    specula::BatchEvaluator(*m, pool).eval(items);
    for (size_t i = 0; i < ctx.size(); ++i) {
        alone[i]->eval(next[i]);
        ASSERT_EQ(together[i]->n_logits(), alone[i]->n_logits());
        for (int r = 0; r < alone[i]->n_logits(); ++r) {
            EXPECT_EQ(0,
                      std::memcmp(together[i]->logits(r), alone[i]->logits(r), sizeof(float) * nv))
                << path << ": session " << i << " row " << r;
        }
    }
}

TEST(Phi3, BatchOfSessionsEqualsEachAlone) {
    expect_batch_equals_alone(kPhi3Swa);
}

TEST(Mistral3, BatchOfSessionsEqualsEachAlone) {
    expect_batch_equals_alone(kMistral3);
}

// ---------------------------------------------------------------------------------------------
// Greedy speculative decoding equals plain decoding. The sessions' 512 positions put the phi3
// F16 file on its long factors; rejected drafts roll back across the window's edge.

std::vector<token_id> generate(Session& target, specula::Drafter* drafter,
                               const std::vector<token_id>& prompt, int n_draft,
                               specula::SpecStats* st = nullptr) {
    specula::SamplingParams sp;
    sp.temp = 0.f;
    specula::Sampler sampler(sp);
    specula::GenParams gp;
    gp.n_predict = 32;
    gp.ignore_eos = true;
    gp.n_draft = n_draft;
    return specula::generate_tokens(target, sampler, drafter, prompt, gp, st);
}

TEST(Phi3, SpeculativeGreedyEqualsPlain) {
    auto draft = Model::load(kPhiDraft);
    for (const std::string& path : {kPhi4, kPhi3Swa, kMistral3}) {
        auto target = Model::load(path);
        Session session(*target, SessionParams{512, 1});
        specula::DraftModelParams dp;
        dp.n_threads = 1;
        dp.sampling.temp = 0.f;
        specula::DraftModelDrafter drafter(*draft, dp);
        const std::string ref_path = path.substr(0, path.size() - 5) + ".json";
        const auto ref = nlohmann::json::parse(specula::test::read_file(ref_path));
        int n_sure = 0;
        for (const auto& p : ref["prompts"]) {
            const auto prompt = p["token_ids"].get<std::vector<token_id>>();
            const auto plain = generate(session, nullptr, prompt, 0);
            ASSERT_EQ(plain.size(), 32u);
            // ik_llama.cpp's greedy tokens are ours up to its first near-tie (top-2 gap within
            // twice the weight type's logit tolerance, as in test_model_parity_arch).
            const auto ref_ids = p["greedy"]["token_ids"].get<std::vector<token_id>>();
            const double tol = ref["model"]["general.file_type"] == "1" ? 0.03 : 0.5;
            auto gap = [](const nlohmann::json& top) {
                return top[0][1].get<double>() - top[1][1].get<double>();
            };
            for (size_t i = 0; i < ref_ids.size(); ++i) {
                const auto& top =
                    i == 0 ? p["prompt_top"].back() : p["greedy"]["steps"][i - 1]["top"];
                if (gap(top) <= 2 * tol) break;
                EXPECT_EQ(plain[i], ref_ids[i])
                    << path << ", prompt " << p["name"] << " token " << i;
                ++n_sure;
            }
            for (int n : {1, 3, 8}) {
                specula::SpecStats st;
                const auto spec = generate(session, &drafter, prompt, n, &st);
                EXPECT_EQ(spec, plain) << path << ", prompt " << p["name"] << ", N=" << n;
                if (path == kPhi4) {  // the draft is block 0 of this target
                    EXPECT_LT(st.n_target_passes, 32) << "no draft token was ever accepted";
                }
            }
        }
        EXPECT_GE(n_sure, 4) << path << ": too few reference tokens compared";
    }
}

// ---------------------------------------------------------------------------------------------
// Hyperparameters of real models' metadata (no tensors: the architecture's reader alone).

struct Meta {
    std::string arch;
    std::vector<std::pair<std::string, uint32_t>> u32;
    std::vector<std::pair<std::string, float>> f32;
    std::vector<std::pair<std::string, std::string>> str;
};

specula::HParams read_meta(const Meta& m, const std::string& tag) {
    specula::GGUFWriter w;
    w.set_string("general.architecture", m.arch);
    for (const auto& [k, v] : m.u32) w.set_u32(m.arch + "." + k, v);
    for (const auto& [k, v] : m.f32) w.set_f32(m.arch + "." + k, v);
    for (const auto& [k, v] : m.str) w.set_string(m.arch + "." + k, v);
    const std::string path = specula::test::temp_dir("phi3") + "/" + tag + ".gguf";
    w.write(path);
    const auto f = specula::GGUFFile::open(path);
    specula::HParams hp;
    hp.arch = m.arch;
    specula::find_arch(m.arch, path).read(*f, hp);
    return hp;
}

Meta phi_meta(uint32_t layers, uint32_t ctx, uint32_t embd, uint32_t heads, uint32_t kv_heads) {
    return {"phi3",
            {{"context_length", ctx},
             {"embedding_length", embd},
             {"block_count", layers},
             {"feed_forward_length", 4 * embd},
             {"attention.head_count", heads},
             {"attention.head_count_kv", kv_heads},
             {"rope.dimension_count", embd / heads}},
            {{"attention.layer_norm_rms_epsilon", 1e-5f}},
            {}};
}

TEST(Phi3, Phi4MetadataReadsAsWritten) {
    Meta m = phi_meta(40, 16384, 5120, 40, 10);  // Phi-4 (14B)
    m.u32.push_back({"attention.sliding_window", 0});
    m.f32.push_back({"rope.freq_base", 250000.f});
    const auto hp = read_meta(m, "phi4");
    EXPECT_EQ(hp.n_swa, 0) << "sliding_window 0: full attention";
    EXPECT_EQ(hp.head_dim, 128);
    EXPECT_EQ(hp.n_rot, 128);
    EXPECT_EQ(hp.n_head_kv, 10);
    EXPECT_EQ(hp.n_ff, 20480);
    EXPECT_TRUE(hp.rope_neox);
    EXPECT_EQ(hp.rope_freq_base, 250000.f);
    EXPECT_EQ(hp.rope_freq_scale, 1.f);
    EXPECT_EQ(hp.rope_yarn, false);
    EXPECT_EQ(hp.rope_attn_factor, 1.f);
    EXPECT_EQ(hp.n_ctx_orig, 16384);
    EXPECT_EQ(hp.attn_scale, 1.f) << "q is scaled before the attention instead";
}

// Files written before attention.sliding_window existed get ik_llama.cpp's defaults by shape;
// other files without the key are refused.
TEST(Phi3, LegacySlidingWindowDefaults) {
    EXPECT_EQ(read_meta(phi_meta(32, 4096, 3072, 32, 32), "mini4k").n_swa, 2047);
    EXPECT_EQ(read_meta(phi_meta(40, 4096, 5120, 40, 10), "medium4k").n_swa, 2047);
    EXPECT_EQ(read_meta(phi_meta(32, 131072, 3072, 32, 32), "mini128k").n_swa, 262144);
    EXPECT_EQ(read_meta(phi_meta(40, 131072, 5120, 40, 10), "medium128k").n_swa, 131072);
    Meta mini = phi_meta(32, 131072, 3072, 32, 32);  // Phi-3.5-mini writes its LongRoPE keys
    mini.u32.push_back({"attention.sliding_window", 262144});
    mini.u32.push_back({"rope.scaling.original_context_length", 4096});
    mini.f32.push_back({"rope.scaling.attn_factor", 1.1902f});
    const auto hp = read_meta(mini, "mini35");
    EXPECT_EQ(hp.n_ctx_orig, 4096);
    EXPECT_EQ(hp.rope_attn_factor, 1.1902f);
    EXPECT_EQ(hp.head_dim, 96);
    try {
        read_meta(phi_meta(2, 8192, 256, 4, 4), "no-swa");
        ADD_FAILURE() << "a phi3 file without attention.sliding_window loaded";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("phi3.attention.sliding_window"), std::string::npos)
            << e.what();
    }
}

TEST(Mistral3, Ministral3MetadataReadsAsWritten) {
    const Meta m = {"mistral3",
                    {{"context_length", 262144},
                     {"embedding_length", 3072},
                     {"block_count", 26},
                     {"feed_forward_length", 9216},
                     {"attention.head_count", 32},
                     {"attention.head_count_kv", 8},
                     {"attention.key_length", 128},
                     {"attention.value_length", 128},
                     {"rope.dimension_count", 128},
                     {"rope.scaling.original_context_length", 16384}},
                    {{"attention.layer_norm_rms_epsilon", 1e-5f},
                     {"rope.freq_base", 1e6f},
                     {"rope.scaling.factor", 16.f},
                     {"rope.scaling.yarn_beta_fast", 32.f},
                     {"rope.scaling.yarn_beta_slow", 1.f},
                     {"rope.scaling.yarn_log_multiplier", 1.f},
                     {"attention.temperature_scale", 0.1f}},
                    {{"rope.scaling.type", "yarn"}}};
    const auto hp = read_meta(m, "ministral3");
    EXPECT_FALSE(hp.rope_neox);
    EXPECT_EQ(hp.head_dim, 128);
    EXPECT_EQ(hp.rope_freq_scale, 1.f / 16.f);
    EXPECT_EQ(hp.rope_yarn, true);
    EXPECT_EQ(hp.rope_attn_factor, 1.f) << "log multiplier 1: mscale(16, 1) / mscale(16, 1)";
    EXPECT_EQ(hp.n_ctx_orig, 16384);
    EXPECT_EQ(hp.attn_temp_floor, 16384);
    EXPECT_EQ(hp.attn_temp_scale, 0.1f);
    EXPECT_EQ(hp.n_swa, 0);
    EXPECT_EQ(hp.attn_scale, 0.f) << "1/sqrt(head_dim)";
}

// ---------------------------------------------------------------------------------------------
// Bad input, on modified copies of the files.

TEST(Phi3BadInput, FusedTensorsWithTheWrongRowCountNameTheTensor) {
    GgufEdit qkv;
    qkv.cut_tensor = "blk.1.attn_qkv.weight";
    qkv.cut_rows = 192;  // Q only: K and V missing
    expect_load_error(write_variant(kPhi4, "qkv-rows", qkv),
                      {"blk.1.attn_qkv.weight", "shape [192, 192]", "expected [192, 320]"});
    GgufEdit up;
    up.cut_tensor = "blk.0.ffn_up.weight";
    up.cut_rows = 256;  // an unfused up: no gate half
    expect_load_error(write_variant(kPhi3Swa, "up-rows", up),
                      {"blk.0.ffn_up.weight", "expected [192, 512]"});
    // Metadata that contradicts the fused matrix: 3 KV heads make Q | K | V 576 rows.
    GgufEdit kv;
    kv.set_u32 = {{"phi3.attention.head_count_kv", 3}};
    expect_load_error(write_variant(kPhi4, "kv3", kv), {"blk.0.attn_qkv.weight", "shape"});
}

TEST(Phi3BadInput, MissingFusedTensorOrKeyIsNamed) {
    GgufEdit ed;
    ed.drop_tensor = "blk.0.attn_qkv.weight";
    expect_load_error(write_variant(kPhi4, "no-qkv", ed),
                      {"missing tensor", "blk.0.attn_qkv.weight"});
    GgufEdit out;
    out.drop_tensor = "output.weight";  // phi3 never ties the output to the embedding
    expect_load_error(write_variant(kPhi4, "no-output", out), {"missing tensor", "output.weight"});
    GgufEdit swa;
    swa.drop_keys = {"phi3.attention.sliding_window"};
    expect_load_error(write_variant(kPhi4, "no-swa", swa), {"phi3.attention.sliding_window"});
    GgufEdit hd;
    hd.set_u32 = {{"phi3.attention.key_length", 32},
                  {"phi3.attention.value_length", 32},
                  {"phi3.rope.dimension_count", 32}};
    expect_load_error(write_variant(kPhi4, "hd32", hd),
                      {"phi3.attention.key_length", "embedding_length"});
    GgufEdit yarn;
    yarn.set_str = {{"phi3.rope.scaling.type", "yarn"}};
    yarn.set_f32 = {{"phi3.rope.scaling.factor", 4.f}};
    expect_load_error(write_variant(kPhi4, "yarn", yarn), {"phi3.rope.scaling.type", "yarn"});
}

TEST(Mistral3BadInput, KeysAreNamed) {
    GgufEdit rot;
    rot.set_u32 = {{"mistral3.rope.dimension_count", 32}};
    expect_load_error(write_variant(kMistral3, "rot32", rot), {"mistral3.rope.dimension_count"});
    GgufEdit type;
    type.set_str = {{"mistral3.rope.scaling.type", "longrope"}};  // factor 16 is set
    expect_load_error(write_variant(kMistral3, "longrope", type),
                      {"mistral3.rope.scaling.type", "longrope", "yarn"});
    GgufEdit q;
    q.drop_tensor = "blk.1.attn_q.weight";
    expect_load_error(write_variant(kMistral3, "no-q", q),
                      {"missing tensor", "blk.1.attn_q.weight"});
}

TEST(Phi3BadInput, UnknownArchitectureListsTheNewOnes) {
    GgufEdit ed;
    ed.set_str = {{"general.architecture", "phi4"}};
    expect_load_error(write_variant(kPhi4, "phi4", ed),
                      {"unsupported architecture 'phi4'", "phi3", "mistral3"});
}

}  // namespace
