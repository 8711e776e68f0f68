// Greedy speculative decoding is exact: for every draft length, drafter and model pair (F32
// TinyStories, F16, Q8_0 and Q4_K_M synthetic pairs, qwen3 and qwen3moe targets with a qwen3
// draft, gemma3 with its draft and qwen35 / qwen35moe with three drafters from tests/data/arch,
// n-gram lookup) the generated token ids
// equal plain greedy decoding of the target, a draft identical to the target is always accepted,
// and acceptance is at least llama.cpp's on the same pairs (reference/speculative.json).
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "model/session.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/mtp_drafter.h"
#include "speculative/drafters/ngram_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"
#ifdef SPECULA_HAVE_VULKAN
#include "vulkan/backend.h"
#endif

using namespace specula;
using json = nlohmann::json;

namespace {

#ifdef SPECULA_HAVE_VULKAN
// test_speculative_greedy_vulkan runs this program with SPECULA_NGL: the backend must be there.
const bool kRegistered = (vk::register_backend(), true);
#endif

json load_json(const std::string& rel) {
    return json::parse(test::read_file(test::shared_path(rel)));
}

// The prompts llama.cpp used for a model: token ids from its reference dump (BOS-only skipped).
std::vector<std::vector<token_id>> reference_prompts(const std::string& model_path) {
    std::string stem = model_path.substr(model_path.rfind('/') + 1);
    stem = stem.substr(0, stem.size() - 5);
    std::vector<std::vector<token_id>> out;
    const json ref = load_json("reference/" + stem + ".json");
    for (const json& p : ref["prompts"])
        if (p["name"] != "bos_only") out.push_back(p["token_ids"].get<std::vector<token_id>>());
    return out;
}

struct Pair {
    std::string target, draft;
};

const std::vector<Pair> kPairs = {
    {"models/tinystories/stories260K.gguf", "models/tinystories/llama2xs.gguf"},
    {"models/synthetic/rand-llama-tok512-d256-l2-F16.gguf",
     "models/synthetic/rand-llama-tok512-d256-l1-draft-F16.gguf"},
    {"models/synthetic/rand-llama-tok512-d256-l2-Q8_0.gguf",
     "models/synthetic/rand-llama-tok512-d256-l1-draft-Q8_0.gguf"},
    {"models/synthetic/rand-llama-tok512-d256-l2-Q4_K_M.gguf",
     "models/synthetic/rand-llama-tok512-d256-l1-draft-Q8_0.gguf"},
};

// One thread: the models are tiny, and tests share a small machine.
const SessionParams kOneThread{0, 1};

SamplingParams greedy() {
    SamplingParams p;
    p.temp = 0.f;
    return p;
}

std::vector<token_id> run(Session& target, Drafter* drafter, const std::vector<token_id>& prompt,
                          int n_predict, int n_draft, SpecStats* st = nullptr) {
    Sampler sampler(greedy());
    GenParams gp;
    gp.n_predict = n_predict;
    gp.ignore_eos = true;
    gp.n_draft = n_draft;
    return generate_tokens(target, sampler, drafter, prompt, gp, st);
}

}  // namespace

// qwen3 (F16, Q8_0) and qwen3moe targets with the 1-layer qwen3 draft, from tests/data/arch.
// Under SPECULA_NGL qwen3 runs on the device and qwen3moe falls back to the CPU.
TEST(SpecGreedy, Qwen3PairsEqualPlain) {
    const std::string dir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
    const bool on_gpu = env_value("SPECULA_NGL").has_value();
    auto draft = Model::load(dir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf");
    for (const std::string stem :
         {"rand-qwen3-tok512-d256-l2-F16", "rand-qwen3-tok512-d256-l2-Q8_0",
          "rand-qwen3moe-e8x4-tok512-d256-l2-Q8_0"}) {
        auto target = Model::load(dir + stem + ".gguf");
        Session session(*target, kOneThread);
        if (on_gpu) {  // qwen3's layers on the device; qwen3moe's experts have no shaders
            const bool moe = target->hparams().n_expert > 0;
            EXPECT_EQ(session.n_gpu_layers(), moe ? 0 : target->hparams().n_layer) << stem;
        }
        DraftModelParams dp;
        dp.n_threads = 1;
        dp.sampling = greedy();
        DraftModelDrafter drafter(*draft, dp);
        const json ref = json::parse(test::read_file(dir + stem + ".json"));
        // On the device (lavapipe in CI: a software GPU) one prompt and two draft lengths.
        json prompts = ref["prompts"];
        if (on_gpu) prompts = json::array({prompts[0]});
        const std::vector<int> lengths =
            on_gpu ? std::vector<int>{3, 8} : std::vector<int>{1, 3, 8};
        for (const json& p : prompts) {
            const auto prompt = p["token_ids"].get<std::vector<token_id>>();
            const auto plain = run(session, nullptr, prompt, 32, 0);
            ASSERT_EQ(int(plain.size()), 32);
            for (int n : lengths) {
                SpecStats st;
                const auto spec = run(session, &drafter, prompt, 32, n, &st);
                EXPECT_EQ(spec, plain) << stem << ", prompt " << p["name"] << ", N=" << n;
                EXPECT_LT(st.n_target_passes, 32) << stem << ": no draft token was ever accepted";
            }
        }
    }
}

// qwen35 and qwen35moe (Gated DeltaNet layers: every rejected draft rolls the recurrent state
// back inside the verify pass) with three drafters: the 1-layer qwen3 draft (same tok512
// vocabulary), the qwen35 file itself (a hybrid draft: its own single-token passes cannot be
// rolled back further than the last one, so it re-syncs from the longest prefix it can return
// to), and n-gram lookup.
TEST(SpecGreedy, Qwen35EqualsPlainWithEveryDrafter) {
    const std::string dir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
    auto qwen3_draft = Model::load(dir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf");
    auto self_draft = Model::load(dir + "rand-qwen35-tok512-d128-l4-F16.gguf");
    for (const std::string stem :
         {"rand-qwen35-tok512-d128-l4-F16", "rand-qwen35moe-e8x2-tok512-d128-l3-F16"}) {
        auto target = Model::load(dir + stem + ".gguf");
        Session session(*target, kOneThread);
        DraftModelParams dp;
        dp.n_threads = 1;
        dp.sampling = greedy();
        DraftModelDrafter d_qwen3(*qwen3_draft, dp), d_self(*self_draft, dp);
        NgramDrafter ngram(NgramParams{});
        const json ref = json::parse(test::read_file(dir + stem + ".json"));
        int n_prompts = 0;
        for (const json& p : ref["prompts"]) {
            if (++n_prompts > 2) break;  // two prompts keep the test short
            const auto prompt = p["token_ids"].get<std::vector<token_id>>();
            const auto plain = run(session, nullptr, prompt, 32, 0);
            ASSERT_EQ(int(plain.size()), 32);
            for (Drafter* d : {(Drafter*)&d_qwen3, (Drafter*)&d_self, (Drafter*)&ngram}) {
                for (int n : {1, 3, 8}) {
                    // The hybrid draft re-evaluates the history after each rejection: one length.
                    if (d == &d_self && n != 3) continue;
                    SpecStats st;
                    EXPECT_EQ(run(session, d, prompt, 32, n, &st), plain)
                        << stem << ", prompt " << p["name"] << ", " << d->name() << ", N=" << n;
                    if (d == &d_self && stem == "rand-qwen35-tok512-d128-l4-F16") {
                        EXPECT_EQ(st.n_accepted, st.n_drafted) << "the target as its own draft";
                        EXPECT_LT(st.n_target_passes, 32);
                    }
                }
            }
        }
    }
}

// MTP self-speculation: the qwen35 file with one nextn layer drafts with its own head, k = 1 (one
// head pass per proposal) and k > 1 (the head chained on its own hidden output), over the same
// session for consecutive generations (the head's cache starts anew with each).
void expect_mtp_equals_plain(const std::string& file, const std::string& prompts) {
    SCOPED_TRACE(file);
    const std::string dir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
    auto target = Model::load(dir + file);
    Session session(*target, kOneThread);
    MtpDrafter mtp(*target, greedy());
    const json ref = json::parse(test::read_file(dir + prompts));
    int n_prompts = 0;
    for (const json& p : ref["prompts"]) {
        if (++n_prompts > 2) break;
        const auto prompt = p["token_ids"].get<std::vector<token_id>>();
        const auto plain = run(session, nullptr, prompt, 32, 0);
        ASSERT_EQ(int(plain.size()), 32);
        for (int n : {1, 2, 5}) {
            SpecStats st;
            EXPECT_EQ(run(session, &mtp, prompt, 32, n, &st), plain)
                << "prompt " << p["name"] << ", N=" << n;
            EXPECT_GT(st.n_drafted, 0) << "N=" << n;
            EXPECT_LE(st.n_accepted, st.n_drafted);
        }
    }
}

TEST(SpecGreedy, Qwen35MtpEqualsPlain) {
    expect_mtp_equals_plain("rand-qwen35-mtp1-tok512-d128-l4-F16.gguf",
                            "rand-qwen35-tok512-d128-l4-F16.json");
    // qwen35moe: its head has its own MoE FFN.
    expect_mtp_equals_plain("rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf",
                            "rand-qwen35moe-e8x2-tok512-d128-l3-F16.json");
}

// gemma3 (window 16, 5 of 7 layers sliding) with its 6-layer draft: the prompts (53-142 tokens)
// and the 32 generated tokens run far past the window. The target's sliding-window layers keep
// rings of 15 + 12 rows (swa_max_pass 12: a 9-token verify pass and its rollback fit), so they
// wrap every few steps and every rejected draft is rolled back across the ring's edge. Under
// SPECULA_NGL every layer runs on the device (whose cache keeps every position).
TEST(SpecGreedy, Gemma3PairEqualsPlainAcrossTheWindow) {
    const std::string dir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
    const bool on_gpu = env_value("SPECULA_NGL").has_value();
    auto draft = Model::load(dir + "rand-gemma3-tok512-d128-l6-draft-Q8_0.gguf");
    const std::string stem = "rand-gemma3-tok512-d128-l7-F16";
    auto target = Model::load(dir + stem + ".gguf");
    SessionParams sp = kOneThread;
    sp.n_ctx = 256;
    sp.swa_max_pass = 12;
    Session ring(*target, sp);
    sp.swa_max_pass = 1000;  // rows = n_ctx: no ring
    Session whole(*target, sp);
    if (on_gpu) {
        EXPECT_EQ(ring.n_gpu_layers(), target->hparams().n_layer);
    }
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling = greedy();
    DraftModelDrafter drafter(*draft, dp);
    const json ref = json::parse(test::read_file(dir + stem + ".json"));
    json prompts = ref["prompts"];
    if (on_gpu) prompts = json::array({prompts[0]});  // lavapipe is slow: one prompt, two lengths
    const std::vector<int> lengths = on_gpu ? std::vector<int>{3, 8} : std::vector<int>{1, 3, 8};
    for (const json& p : prompts) {
        const auto prompt = p["token_ids"].get<std::vector<token_id>>();
        const auto plain = run(whole, nullptr, prompt, 32, 0);
        ASSERT_EQ(int(plain.size()), 32);
        EXPECT_EQ(run(ring, nullptr, prompt, 32, 0), plain) << "ring cache, prompt " << p["name"];
        for (int n : lengths) {
            SpecStats st;
            const auto spec = run(ring, &drafter, prompt, 32, n, &st);
            EXPECT_EQ(spec, plain) << stem << ", prompt " << p["name"] << ", N=" << n;
            EXPECT_LT(st.n_target_passes, 32) << stem << ": no draft token was ever accepted";
            EXPECT_GT(st.n_drafted, st.n_accepted)
                << "some drafts must be rejected and rolled back";
        }
    }
}

// gemma4 (layers of their own shapes; the last 2 read the caches of layers 2 and 3, one of
// them a ring; V = K in its full layers; per-layer inputs) with its 3-layer draft: as gemma3's,
// the rings wrap and every rejected draft rolls back across their edge, the shared layers
// reading rows their source layer's ring still holds. CPU only (gemma4 has no device block).
TEST(SpecGreedy, Gemma4PairEqualsPlainAcrossTheWindow) {
    const std::string dir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
    auto draft = Model::load(dir + "rand-gemma4-tok512-d128-l3-draft-Q8_0.gguf");
    const std::string stem = "rand-gemma4-tok512-d128-l6-F16";
    auto target = Model::load(dir + stem + ".gguf");
    SessionParams sp = kOneThread;
    sp.n_ctx = 256;
    sp.n_gpu_layers = 0;
    sp.swa_max_pass = 12;
    Session ring(*target, sp);
    sp.swa_max_pass = 1000;  // rows = n_ctx: no ring
    Session whole(*target, sp);
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling = greedy();
    DraftModelDrafter drafter(*draft, dp);
    const json ref = json::parse(test::read_file(dir + stem + ".json"));
    for (const json& p : ref["prompts"]) {
        const auto prompt = p["token_ids"].get<std::vector<token_id>>();
        const auto plain = run(whole, nullptr, prompt, 32, 0);
        ASSERT_EQ(int(plain.size()), 32);
        EXPECT_EQ(run(ring, nullptr, prompt, 32, 0), plain) << "ring cache, prompt " << p["name"];
        for (int n : {1, 3, 8}) {
            SpecStats st;
            EXPECT_EQ(run(ring, &drafter, prompt, 32, n, &st), plain)
                << stem << ", prompt " << p["name"] << ", N=" << n;
            EXPECT_GT(st.n_drafted, 0);
        }
    }
    // The MoE variant (experts beside each dense FFN) with the same draft, one prompt.
    auto moe = Model::load(dir + "rand-gemma4moe-e8x2-tok512-d128-l4-F16.gguf");
    Session moe_session(*moe, sp);
    const auto prompt = ref["prompts"][0]["token_ids"].get<std::vector<token_id>>();
    const auto plain = run(moe_session, nullptr, prompt, 32, 0);
    for (int n : {2, 6}) EXPECT_EQ(run(moe_session, &drafter, prompt, 32, n), plain) << "N=" << n;
}

// CTest's test_speculative_greedy_vulkan runs this with both models on the GPU backend
// (SPECULA_NGL, model/load/offload.h): lavapipe is slow, so there it takes each pair's first prompt
// and three draft lengths.
TEST(SpecGreedy, EqualsPlainForEveryDraftLengthAndPair) {
    const int n_predict = 32;
    const bool on_gpu = env_value("SPECULA_NGL").has_value();
    const std::vector<int> lengths =
        on_gpu ? std::vector<int>{1, 4, 16} : std::vector<int>{1, 2, 4, 8, 16};
    for (const Pair& pair : kPairs) {
        auto target = Model::load(test::shared_path(pair.target));
        auto draft = Model::load(test::shared_path(pair.draft));
        Session session(*target, kOneThread);
        if (on_gpu) {
            ASSERT_EQ(session.n_gpu_layers(), target->hparams().n_layer) << pair.target;
        }
        DraftModelParams dp;
        dp.n_threads = 1;
        dp.sampling = greedy();
        DraftModelDrafter drafter(*draft, dp);
        auto prompts = reference_prompts(pair.target);
        if (on_gpu) prompts.resize(1);
        for (const auto& prompt : prompts) {
            const auto plain = run(session, nullptr, prompt, n_predict, 0);
            ASSERT_EQ(int(plain.size()), n_predict);
            for (int n : lengths) {
                SpecStats st;
                const auto spec = run(session, &drafter, prompt, n_predict, n, &st);
                EXPECT_EQ(spec, plain) << pair.target << " + " << pair.draft << ", N=" << n;
                EXPECT_GT(st.n_drafted, 0);
                EXPECT_LT(st.n_target_passes, n_predict) << "no draft token was ever accepted";
            }
        }
    }
}

TEST(SpecGreedy, NgramDrafterEqualsPlain) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    Session session(*target, kOneThread);
    NgramDrafter ngram(NgramParams{});
    long accepted = 0;
    for (const auto& prompt : reference_prompts("models/tinystories/stories260K.gguf")) {
        const auto plain = run(session, nullptr, prompt, 160, 0);
        for (int n : {1, 2, 4, 8, 16}) {
            SpecStats st;
            EXPECT_EQ(run(session, &ngram, prompt, 160, n, &st), plain) << "N=" << n;
            accepted += st.n_accepted;
        }
    }
    EXPECT_GT(accepted, 0) << "repetitive TinyStories text should give some n-gram hits";
}

TEST(SpecGreedy, DraftEqualToTargetIsAlwaysAccepted) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    auto same = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    Session session(*target, kOneThread);
    for (float temp : {0.f, 0.8f}) {
        SamplingParams sp;
        sp.temp = temp;
        sp.seed = 7;
        DraftModelParams dp;
        dp.n_threads = 1;
        dp.sampling = sp;
        DraftModelDrafter drafter(*same, dp);
        Sampler sampler(sp);
        GenParams gp;
        gp.n_predict = 100;
        gp.ignore_eos = true;
        gp.n_draft = 6;
        SpecStats st;
        generate_tokens(session, sampler, &drafter,
                        reference_prompts("models/tinystories/stories260K.gguf")[0], gp, &st);
        EXPECT_GT(st.n_drafted, 60) << "temp " << temp;
        EXPECT_EQ(st.n_accepted, st.n_drafted) << "temp " << temp;
        EXPECT_DOUBLE_EQ(st.accept_rate(), 1.0);
        EXPECT_NEAR(st.mean_accept_len(), 7.0, 0.5) << "N=6 gives 7 tokens per pass";
    }
}

// llama.cpp's exact greedy acceptance for a fixed draft length k (llama_agree.accept_k*) on the
// same prompts and 128 tokens: ours follows the same target path, so it must be as high (up to
// the bookkeeping of the last, truncated draft).
TEST(SpecGreedy, AcceptanceAtLeastLlamaCpp) {
    const json ref = load_json("reference/speculative.json");
    for (const json& pr : ref["pairs"]) {
        const std::string tp = pr["target"], dpath = pr["draft"];
        if (tp.find("F32") != std::string::npos) continue;  // same draft and path as F16
        auto target = Model::load(test::shared_path(tp));
        auto draft = Model::load(test::shared_path(dpath));
        Session session(*target, kOneThread);
        DraftModelParams dp;
        dp.n_threads = 1;
        dp.sampling = greedy();
        DraftModelDrafter drafter(*draft, dp);
        for (int k : {4, 8}) {
            long drafted = 0, accepted = 0;
            for (const auto& prompt : reference_prompts(tp)) {
                SpecStats st;
                run(session, &drafter, prompt, 128, k, &st);
                drafted += st.n_drafted;
                accepted += st.n_accepted;
            }
            const double ours = double(accepted) / drafted;
            const double llama = pr["llama_agree"]["accept_k" + std::to_string(k)];
            std::printf("%-70s k=%d accept %.3f (llama.cpp %.3f)\n",
                        pr["pair"].get<std::string>().c_str(), k, ours, llama);
            EXPECT_GE(ours, llama - 0.03) << pr["pair"] << " k=" << k;
        }
    }
}
