// The architectures of 2026 on the Vulkan backend (lavapipe in CI), every layer and the output
// head on the device (-ngl 99): qwen3 (per-head Q/K norm) and gemma3 (Q/K norm, post-norms,
// GeGLU, the scaled embedding, sliding-window layers with their own rope base; the test file's
// window of 16 is crossed by its prompts). Each matches ik_llama.cpp's reference within its
// weight type's tolerance (tests/arch_parity.h), and a position's logits are bit-identical
// whatever the pass's size. The hparams the device lacks keep a model on the CPU with a note:
// gemma2's soft-capping, qwen3moe's experts.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arch_parity.h"
#include "model/load/offload.h"
#include "model/session.h"
#include "test_util.h"
#include "vulkan/backend.h"
#include "vulkan_depth.h"

using namespace specula;
using json = nlohmann::json;

namespace {

const bool kRegistered = (vk::register_backend(), true);

std::string arch_file(const std::string& stem) {
    return test::kArchDataDir + "/" + stem + ".gguf";
}

SessionParams on_device(int ngl) {
    SessionParams sp;
    sp.n_ctx = 256;
    sp.n_threads = 1;
    sp.n_gpu_layers = ngl;
    return sp;
}

// The reference's prompts, concatenated, cut to n tokens.
std::vector<token_id> prompt_of(const std::string& stem, size_t n) {
    const json ref = json::parse(test::read_file(test::kArchDataDir + "/" + stem + ".json"));
    std::vector<token_id> ids;
    for (const auto& p : ref["prompts"]) {
        for (token_id t : p["token_ids"].get<std::vector<token_id>>()) {
            if (ids.size() < n) ids.push_back(t);
        }
    }
    return ids;
}

class VulkanArch : public ::testing::TestWithParam<std::string> {};

TEST_P(VulkanArch, EveryLayerOnTheDeviceMatchesIkLlamaCpp) {
    const std::string stem = GetParam();
    auto m = Model::load(arch_file(stem));
    OffloadParams p;
    p.n_gpu_layers = 99;
    p.n_ctx = 256;
    const OffloadPlan plan = plan_offload(*m, p);
    ASSERT_EQ(plan.n_layers, m->hparams().n_layer) << stem << ": " << plan.note;
    EXPECT_TRUE(plan.output) << stem << ": " << plan.note;
    test::check_arch_parity(stem, 99);
}

INSTANTIATE_TEST_SUITE_P(Files, VulkanArch,
                         ::testing::Values("rand-qwen3-tok512-d256-l2-F16",
                                           "rand-qwen3-tok512-d256-l2-Q8_0",
                                           "rand-qwen3-tok512-d256-l1-draft-Q8_0",
                                           "rand-gemma3-tok512-d128-l7-F16",
                                           "rand-gemma3-tok512-d128-l6-draft-Q8_0"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             std::string s = info.param;
                             for (char& c : s) {
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             }
                             return s;
                         });

// Each position's logits, evaluated on the device in passes of `chunk` tokens.
std::vector<std::vector<float>> logits_by_chunks(const Model& m, const std::vector<token_id>& ids,
                                                 size_t chunk) {
    Session s(m, on_device(99));
    EXPECT_EQ(s.n_gpu_layers(), m.hparams().n_layer);
    return test::eval_in_passes(s, ids, chunk, m.hparams().n_vocab);
}

// 40 positions (gemma3: across its window of 16, on the global and the sliding layers alike)
// give bit-identical logits alone, in passes of 5 and 9, and in one pass.
TEST(VulkanArchBatchInvariance, LogitsDoNotDependOnThePassSize) {
    for (const char* stem : {"rand-gemma3-tok512-d128-l7-F16", "rand-qwen3-tok512-d256-l2-Q8_0"}) {
        auto m = Model::load(arch_file(stem));
        const auto ids = prompt_of(stem, 40);
        ASSERT_EQ(ids.size(), 40u) << stem;
        const auto one = logits_by_chunks(*m, ids, 1);
        for (size_t chunk : {5, 9, 40}) {
            const auto many = logits_by_chunks(*m, ids, chunk);
            ASSERT_EQ(many.size(), one.size());
            for (size_t i = 0; i < one.size(); ++i) {
                ASSERT_EQ(0,
                          std::memcmp(one[i].data(), many[i].data(), one[i].size() * sizeof(float)))
                    << stem << ": position " << i << " differs in passes of " << chunk;
            }
        }
    }
}

// Deep in the cache with sliding windows (tests/vulkan_depth.h): gemma3's window of 16 on six of
// its seven layers, a 1275-position prompt, then passes of 1, 5 (across the segment boundary at
// 1280) and 9 tokens: within F16's parity tolerance of the CPU's logits, bit-identical one token
// at a time.
TEST(VulkanArchAttention, DeepCacheWithSlidingWindows) {
    const std::string stem = "rand-gemma3-tok512-d128-l7-F16";  // 2048 positions, window 16
    auto m = Model::load(arch_file(stem));
    ASSERT_EQ(m->hparams().n_swa, 16);
    const double worst = test::check_attention_at_depth(*m, 1275, 1536, 0.03, stem);
    std::printf("[vulkan] %s at depth 1275: max|device - cpu| %.3g\n", stem.c_str(), worst);
}

// A rollback across the window edge: the device cache's rows are overwritten by the new tokens,
// and the logits equal a fresh session's over the same tokens.
TEST(VulkanArchSession, RollbackAcrossTheWindow) {
    const std::string stem = "rand-gemma3-tok512-d128-l7-F16";
    auto m = Model::load(arch_file(stem));
    const auto ids = prompt_of(stem, 30);
    Session a(*m, on_device(99)), b(*m, on_device(99));
    a.eval(ids);
    a.rollback(24);
    const std::vector<token_id> tail = {7, 8, 9};
    a.eval(tail);
    std::vector<token_id> fresh(ids.begin(), ids.begin() + 24);
    fresh.insert(fresh.end(), tail.begin(), tail.end());
    b.eval(fresh);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0,
                  std::memcmp(a.logits(i), b.logits(24 + i), sizeof(float) * m->hparams().n_vocab))
            << "token " << i << " after rollback";
    }
}

// What the device lacks keeps the model on the CPU, and the plan says why.
TEST(VulkanArchPlan, SoftCappingAndExpertsStayOnTheCpu) {
    const struct {
        const char* stem;
        const char* why;
    } cases[] = {{"rand-gemma2-tok512-d32-l26-F16", "soft-capping"},
                 {"rand-qwen3moe-e8x4-tok512-d256-l2-Q8_0", "mixture-of-experts"}};
    for (const auto& c : cases) {
        auto m = Model::load(arch_file(c.stem));
        OffloadParams p;
        p.n_gpu_layers = 99;
        p.n_ctx = 256;
        const OffloadPlan plan = plan_offload(*m, p);
        EXPECT_EQ(plan.n_layers, 0) << c.stem;
        EXPECT_NE(plan.note.find(c.why), std::string::npos) << c.stem << ": " << plan.note;
    }
}

}  // namespace
