// The Vulkan backend on whatever device the machine has (Mesa's lavapipe in CI): with every
// layer and the output head offloaded (-ngl 99), each supported weight type's logits stay within
// the parity tolerance of llama.cpp's reference (shared/reference/README.md section 1) at every
// prompt position and teacher-forced greedy step; a partial offload (-ngl 1) does too; a
// position's logits are bit-identical whatever the pass's batch size; rollback works on the
// device cache; greedy speculative decoding with both models on the device equals plain greedy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/session.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"
#include "vulkan/backend.h"
#include "vulkan/context.h"
#include "vulkan_depth.h"

using namespace specula;
using json = nlohmann::json;

namespace {

// This program runs layers on Vulkan: it registers the backend before any model loads.
const bool kRegistered = (vk::register_backend(), true);

SessionParams on_device(int ngl, int n_ctx = 256) {
    SessionParams sp;
    sp.n_ctx = n_ctx;
    sp.n_threads = 1;
    sp.n_gpu_layers = ngl;
    return sp;
}

struct Case {
    std::string stem;  // models/<dir>/<stem>.gguf, reference/<stem>.json
    std::string dir;
    double tol;
    int ngl = 99;
};

std::string model_path(const Case& c) {
    return test::shared_path("models/" + c.dir + "/" + c.stem + ".gguf");
}

int argmax(const float* x, int n) {
    int b = 0;
    for (int i = 1; i < n; ++i) b = x[i] > x[b] ? i : b;
    return b;
}

// Our row against one reference top-10 list: every listed logit within tol, and the same top-1
// wherever the reference's top1-top2 gap exceeds 2 tol. Returns the max |diff|.
double compare(const float* ours, int n_vocab, const json& top, double tol,
               const std::string& where) {
    double worst = 0;
    for (const auto& pair : top) {
        const int id = pair[0].get<int>();
        const double d = std::fabs(double(ours[id]) - pair[1].get<double>());
        worst = std::max(worst, d);
        EXPECT_LE(d, tol) << where << ", id " << id;
    }
    const double gap = top[0][1].get<double>() - top[1][1].get<double>();
    if (gap > 2 * tol) {
        EXPECT_EQ(argmax(ours, n_vocab), top[0][0].get<int>()) << where;
    }
    return worst;
}

class VulkanParity : public ::testing::TestWithParam<Case> {};

TEST(VulkanDevices, AtLeastOneDevice) {
    const auto devs = vk::list_devices();
    ASSERT_FALSE(devs.empty()) << "no Vulkan device (install mesa-vulkan-drivers for lavapipe)";
    for (const auto& d : devs) {
        EXPECT_FALSE(d.name.empty());
        EXPECT_GT(d.local_bytes, 0u) << d.name;
    }
}

// The first prompt of the reference in one batch, then 8 teacher-forced greedy steps (lavapipe
// is slow on a loaded 2-core machine; batch invariance below covers longer sequences).
TEST_P(VulkanParity, MatchesReference) {
    const Case& c = GetParam();
    const json ref =
        json::parse(test::read_file(test::shared_path("reference/" + c.stem + ".json")));
    auto model = Model::load(model_path(c));
    const int n_vocab = model->hparams().n_vocab;
    Session s(*model, on_device(c.ngl, ref["eval"]["n_ctx"].get<int>()));
    ASSERT_EQ(s.n_gpu_layers(), std::min(c.ngl, model->hparams().n_layer)) << c.stem;
    double worst = 0;
    int n_prompts = 0;
    for (const auto& p : ref["prompts"]) {
        if (p["name"] == "bos_only" || ++n_prompts > 1) continue;
        const auto ids = p["token_ids"].get<std::vector<token_id>>();
        s.reset();
        s.eval(ids);
        ASSERT_EQ(s.n_logits(), static_cast<int>(ids.size()));
        for (size_t i = 0; i < ids.size(); ++i) {
            worst =
                std::max(worst, compare(s.logits(static_cast<int>(i)), n_vocab, p["prompt_top"][i],
                                        c.tol, c.stem + " prompt pos " + std::to_string(i)));
        }
        const auto gids = p["greedy"]["token_ids"].get<std::vector<token_id>>();
        for (size_t i = 0; i < gids.size() && i < 8; ++i) {
            s.eval(std::span<const token_id>(&gids[i], 1));
            worst = std::max(worst, compare(s.logits(0), n_vocab, p["greedy"]["steps"][i]["top"],
                                            c.tol, c.stem + " greedy step " + std::to_string(i)));
        }
    }
    EXPECT_GT(n_prompts, 0);
    std::printf("[vulkan] %-40s -ngl %2d tol %-6g max|d| %.3g\n", c.stem.c_str(), c.ngl, c.tol,
                worst);
}

const std::vector<Case> kCases = {
    {"rand-llama-tok512-d256-l2-F32", "synthetic", 1e-4},
    {"rand-llama-tok512-d256-l2-F16", "synthetic", 0.03},
    {"rand-llama-tok512-d256-l2-BF16", "synthetic", 0.1},
    {"rand-llama-tok512-d256-l2-Q8_0", "synthetic", 0.5},
    {"rand-llama-tok512-d256-l2-Q4_0", "synthetic", 0.5},
    {"rand-llama-tok512-d256-l2-Q4_K_M", "synthetic", 0.5},
    {"rand-llama-tok512-d256-l2-Q5_K_M", "synthetic", 0.5},
    {"rand-llama-tok512-d256-l2-Q6_K", "synthetic", 0.5},
    {"rand-llama-tok512-d256-l2-tied-F16", "synthetic", 0.03},
    {"rand-qwen2-tok512-d256-l2-F16", "synthetic", 0.03},
    {"rand-llama-llama3vocab-d64-l1-tied-Q8_0", "synthetic", 1.0},
    {"rand-llama-d256-l2-Q4_K_M", "synthetic", 0.5},
    {"stories260K", "tinystories", 1e-4},
    {"llama2xs", "tinystories", 1e-4},
    // Tensors without a shader run on the CPU, the rest of their layers on the device: Q3_K_M
    // mixes Q3_K (CPU) with Q4_K/Q5_K/Q6_K (device); every IQ4_NL matrix is the CPU's.
    {"rand-llama-tok512-d256-l2-Q3_K_M", "synthetic", 0.5},
    {"rand-llama-tok512-d256-l2-IQ4_NL", "synthetic", 0.5},
    // Partial offload: layer 0 on the device, layer 1 and the head on the CPU.
    {"rand-llama-tok512-d256-l2-Q8_0", "synthetic", 0.5, 1},
    {"rand-llama-tok512-d256-l2-F32", "synthetic", 1e-4, 1},
};

INSTANTIATE_TEST_SUITE_P(Types, VulkanParity, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                             std::string s =
                                 info.param.stem + "_ngl" + std::to_string(info.param.ngl);
                             for (char& ch : s) {
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             }
                             return s;
                         });

std::vector<token_id> prompt_of(const std::string& stem, size_t n) {
    const json ref = json::parse(test::read_file(test::shared_path("reference/" + stem + ".json")));
    std::vector<token_id> ids;
    for (const auto& p : ref["prompts"]) {
        for (token_id t : p["token_ids"].get<std::vector<token_id>>()) {
            if (ids.size() < n) ids.push_back(t);
        }
    }
    return ids;
}

// Each position's logits, evaluated in chunks of `chunk` tokens.
std::vector<std::vector<float>> logits_by_chunks(const Model& m, int ngl,
                                                 const std::vector<token_id>& ids, size_t chunk) {
    Session s(m, on_device(ngl));
    return test::eval_in_passes(s, ids, chunk, m.hparams().n_vocab);
}

// Every type with a shader (Q4_K_M and Q5_K_M files bring Q6_K and Q5_K/Q4_K tensors too): a
// position's logits are bit-identical whether it is evaluated alone or in a pass of 2, 5, 9 or 16
// tokens (matvec.comp applies each decoded weight unit to up to 16 columns); -ngl 1 for two of
// them (the device's hidden state handed to the CPU's layers).
TEST(VulkanBatchInvariance, LogitsDoNotDependOnBatchSize) {
    for (const char* type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
        const std::string stem = std::string("rand-llama-tok512-d256-l2-") + type;
        auto m = Model::load(test::shared_path("models/synthetic/" + stem + ".gguf"));
        const auto ids = prompt_of(stem, 16);
        ASSERT_EQ(ids.size(), 16u);
        const bool partial = stem.ends_with("Q4_K_M") || stem.ends_with("Q8_0");
        for (int ngl : {99, 1}) {
            if (ngl == 1 && !partial) continue;
            const auto one = logits_by_chunks(*m, ngl, ids, 1);
            for (size_t chunk : {2, 5, 9, 16}) {
                const auto many = logits_by_chunks(*m, ngl, ids, chunk);
                ASSERT_EQ(many.size(), one.size());
                for (size_t i = 0; i < one.size(); ++i) {
                    ASSERT_EQ(0, std::memcmp(one[i].data(), many[i].data(),
                                             one[i].size() * sizeof(float)))
                        << stem << " -ngl " << ngl << ": position " << i << " differs with batch "
                        << chunk;
                }
            }
        }
    }
}

// A prompt longer than a weight tile (16 columns) runs in tiles of 16: 40 tokens in one pass give
// each position the logits it gets alone.
TEST(VulkanBatchInvariance, PromptBatchesLongerThanATile) {
    const std::string stem = "rand-llama-tok512-d256-l2-Q8_0";
    auto m = Model::load(test::shared_path("models/synthetic/" + stem + ".gguf"));
    const auto ids = prompt_of(stem, 40);
    ASSERT_EQ(ids.size(), 40u);
    const auto one = logits_by_chunks(*m, 99, ids, 1);
    const auto all = logits_by_chunks(*m, 99, ids, 40);
    ASSERT_EQ(all.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
        ASSERT_EQ(0, std::memcmp(one[i].data(), all[i].data(), one[i].size() * sizeof(float)))
            << "position " << i;
    }
}

// Deep in the cache (tests/vulkan_depth.h): a 1275-position prompt (segments 0-4 of 256), then
// passes of 1 (position 1275), 5 (1276-1280, across the boundary at 1280) and 9 tokens: within
// F32's parity tolerance of the CPU's logits and bit-identical one token at a time.
TEST(VulkanAttention, DeepCacheMatchesTheCpuAndDoesNotDependOnThePass) {
    const std::string stem = "rand-llama-tok512-d256-l2-F32";  // 2048 positions, GQA 8 / 4
    auto m = Model::load(test::shared_path("models/synthetic/" + stem + ".gguf"));
    const double worst = test::check_attention_at_depth(*m, 1275, 1536, 1e-4, stem);
    std::printf("[vulkan] %s at depth 1275: max|device - cpu| %.3g\n", stem.c_str(), worst);
}

TEST(VulkanSession, RollbackOverwritesTheDeviceCache) {
    auto m = Model::load(test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-Q8_0.gguf"));
    const auto ids = prompt_of("rand-llama-tok512-d256-l2-Q8_0", 12);
    Session a(*m, on_device(99)), b(*m, on_device(99));
    a.eval(ids);
    a.rollback(6);
    const std::vector<token_id> tail = {7, 8, 9};
    a.eval(tail);
    std::vector<token_id> fresh(ids.begin(), ids.begin() + 6);
    fresh.insert(fresh.end(), tail.begin(), tail.end());
    b.eval(fresh);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0,
                  std::memcmp(a.logits(i), b.logits(6 + i), sizeof(float) * m->hparams().n_vocab))
            << "token " << i << " after rollback";
    }
}

// IQ4_NL has no shader: its matrices run on the CPU (the same kernels as the CPU path) while
// the norms, RoPE, attention, the device KV cache and the Q6_K head stay on the device; Q3_K_M's
// Q3_K matrices likewise. The logits stay within the quantised parity tolerance of the CPU path's
// (the device's F32 activations differ from the CPU's Q8 rounding in the head and Q4_K..Q6_K
// matrices) and do not depend on the pass's size.
TEST(VulkanSession, TensorsWithoutAShaderRunOnTheCpu) {
    for (const char* type : {"IQ4_NL", "Q3_K_M"}) {
        const std::string stem = std::string("rand-llama-tok512-d256-l2-") + type;
        auto m = Model::load(test::shared_path("models/synthetic/" + stem + ".gguf"));
        Session dev(*m, on_device(99)), cpu(*m, on_device(0));
        EXPECT_EQ(dev.n_gpu_layers(), m->hparams().n_layer) << stem;
        const auto ids = prompt_of(stem, 12);
        dev.eval(ids);
        cpu.eval(ids);
        const int nv = m->hparams().n_vocab;
        for (int i = 0; i < 12; ++i) {
            double worst = 0;
            for (int j = 0; j < nv; ++j) {
                worst = std::max(worst, std::fabs(double(dev.logits(i)[j]) - cpu.logits(i)[j]));
            }
            EXPECT_LT(worst, 0.5) << stem << " position " << i;
        }
        const auto one = logits_by_chunks(*m, 99, ids, 1);
        const auto many = logits_by_chunks(*m, 99, ids, 12);
        for (size_t i = 0; i < one.size(); ++i) {
            ASSERT_EQ(0, std::memcmp(one[i].data(), many[i].data(), sizeof(float) * nv))
                << stem << " position " << i << " depends on the batch size";
        }
    }
}

// A context whose device KV cache cannot fit in the device's memory is refused with a message
// naming the sizes (before anything is allocated on the device).
TEST(VulkanSession, RefusesAPlanLargerThanTheDevice) {
    auto m = Model::load(test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-Q8_0.gguf"));
    const auto devs = vk::list_devices();
    ASSERT_FALSE(devs.empty());
    const double row = 2.0 * sizeof(float) * m->hparams().n_layer * m->hparams().n_embd_kv();
    const int n_ctx = static_cast<int>(std::min(2e9, devs[0].local_bytes / row + 1));
    try {
        Session s(*m, on_device(99, n_ctx));
        FAIL() << "a " << n_ctx << "-position context was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("more than the"), std::string::npos) << e.what();
    }
}

TEST(VulkanSession, LastLogitsOnlyMatchAllLogits) {
    auto m = Model::load(test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-F16.gguf"));
    const auto ids = prompt_of("rand-llama-tok512-d256-l2-F16", 10);
    Session a(*m, on_device(99)), b(*m, on_device(99));
    a.eval(ids, true);
    b.eval(ids, false);
    ASSERT_EQ(b.n_logits(), 1);
    EXPECT_EQ(0, std::memcmp(a.logits(9), b.logits(0), sizeof(float) * m->hparams().n_vocab));
}

// Target and draft both on the device (-ngl 99, -ngld 99, the models' placement as the CLI
// loads them): greedy speculative output equals plain greedy output for several draft lengths.
TEST(VulkanSpec, GreedySpeculativeEqualsPlain) {
    struct P {
        const char *target, *draft;
    };
    for (const P& p : {P{"models/tinystories/llama2xs.gguf", "models/tinystories/stories260K.gguf"},
                       P{"models/synthetic/rand-llama-tok512-d256-l2-F16.gguf",
                         "models/synthetic/rand-llama-tok512-d256-l1-draft-F16.gguf"},
                       P{"models/synthetic/rand-llama-tok512-d256-l2-Q4_K_M.gguf",
                         "models/synthetic/rand-llama-tok512-d256-l1-draft-Q8_0.gguf"}}) {
        LoadOptions on_device;
        on_device.gpu.n_gpu_layers = 99;
        auto target = Model::load(test::shared_path(p.target), on_device);
        auto draft = Model::load(test::shared_path(p.draft), on_device);
        SessionParams sp;
        sp.n_ctx = 256;
        sp.n_threads = 1;
        Session session(*target, sp);
        EXPECT_EQ(session.n_gpu_layers(), target->hparams().n_layer) << p.target;
        SamplingParams greedy;
        greedy.temp = 0.f;
        const std::vector<token_id> prompt = {target->tokenizer().bos(), 5, 17, 42};
        GenParams gp;
        gp.n_predict = 16;
        gp.ignore_eos = true;
        Sampler s0(greedy);
        const auto plain = generate_tokens(session, s0, nullptr, prompt, gp, nullptr);
        ASSERT_EQ(plain.size(), 16u);
        for (int n_draft : {3, 8}) {
            DraftModelParams dp;
            dp.n_ctx = 256;
            dp.n_threads = 1;
            dp.sampling = greedy;
            DraftModelDrafter drafter(*draft, dp);
            gp.n_draft = n_draft;
            Sampler s1(greedy);
            const auto spec = generate_tokens(session, s1, &drafter, prompt, gp, nullptr);
            EXPECT_EQ(spec, plain) << p.target << " n_draft " << n_draft;
        }
    }
}

}  // namespace
