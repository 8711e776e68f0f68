// The memory plan of `specula run` with layers on the GPU (model/memory_plan.h): it prints each
// Vulkan device's share (offloaded weights + device KV caches of the target and the draft) next
// to the device's memory, and refuses a run whose share does not fit, naming the device, the
// sizes and the flag to lower, before anything is allocated on the device. The device's memory
// is forced small with SPECULA_VULKAN_MEMORY_MIB (model/load/offload.h); SPECULA_NGL / SPECULA_NGLD
// give -ngl / -ngld defaults that the flags override.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli_process.h"
#include "test_util.h"

using namespace specula::test;

namespace {

const std::string kTarget = "models/tinystories/llama2xs.gguf";
const std::string kDraft = "models/tinystories/stories260K.gguf";

// bin/specula with environment variable `name` set to `value` (unset when value is empty).
ProcResult run_with(const char* name, const std::string& value,
                    const std::vector<std::string>& args) {
    if (value.empty())
        unsetenv(name);
    else
        setenv(name, value.c_str(), 1);
    ProcResult r = run_specula(args);
    unsetenv(name);
    return r;
}

std::vector<std::string> run_args(std::vector<std::string> extra) {
    std::vector<std::string> a = {
        "run", "-m", shared_path(kTarget), "-p", "Once upon", "-n", "4", "--temp", "0", "-c", "256",
        "-t",  "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    // -ngl never picks a software device by itself: the tests name the one they run on.
    static const std::string device = specula::test::test_vulkan_device();
    a.insert(a.end(), {"--device", device});
    return a;
}

bool has(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

TEST(VulkanMemoryPlan, PrintsTheDeviceShareNextToTheDeviceMemory) {
    const auto r = run_specula(run_args({"-ngl", "99", "-md", shared_path(kDraft), "-ngld", "99"}));
    ASSERT_EQ(r.status, 0) << r.err;
    // "memory: ... ; Vulkan0 (llvmpipe ...): weights X + KV Y + draft weights Z + draft KV W = T
    // of M"
    EXPECT_TRUE(has(r.err, "; Vulkan")) << r.err;
    EXPECT_TRUE(has(r.err, "+ draft weights")) << r.err;
    EXPECT_TRUE(has(r.err, "offloading 5/5 layers and the output head")) << r.err;
}

TEST(VulkanMemoryPlan, RefusesATargetThatDoesNotFitTheDevice) {
    // llama2xs: ~1.2 MiB of weights, ~0.5 MiB of KV at -c 256: over a 1 MiB device.
    const auto r = run_with("SPECULA_VULKAN_MEMORY_MIB", "1", run_args({"-ngl", "99"}));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(has(r.err, "do not fit on the GPU")) << r.err;
    EXPECT_TRUE(has(r.err, "Vulkan0 (")) << r.err;
    EXPECT_TRUE(has(r.err, "of 1.00 MiB")) << r.err;
    EXPECT_TRUE(has(r.err, "lower -ngl")) << r.err;
    EXPECT_TRUE(r.out.empty()) << "generated although refused: " << r.out;
    // Fewer layers fit: the same budget takes one layer.
    const auto one = run_with("SPECULA_VULKAN_MEMORY_MIB", "1", run_args({"-ngl", "1"}));
    EXPECT_EQ(one.status, 0) << one.err;
    EXPECT_TRUE(has(one.err, "offloading 1/5 layers")) << one.err;
}

TEST(VulkanMemoryPlan, NamesTheDraftFlagWhenTheDraftTakesMost) {
    const auto r = run_with("SPECULA_VULKAN_MEMORY_MIB", "0.5",
                            run_args({"-ngl", "0", "-md", shared_path(kDraft), "-ngld", "99"}));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(has(r.err, "do not fit on the GPU")) << r.err;
    EXPECT_TRUE(has(r.err, "lower -ngld")) << r.err;
}

TEST(VulkanMemoryPlan, EnvironmentGivesTheLayerDefaults) {
    // SPECULA_NGL=99 offloads without -ngl; -ngl 0 overrides it.
    const auto on = run_with("SPECULA_NGL", "99", run_args({}));
    ASSERT_EQ(on.status, 0) << on.err;
    EXPECT_TRUE(has(on.err, "offloading 5/5 layers")) << on.err;
    const auto off = run_with("SPECULA_NGL", "99", run_args({"-ngl", "0"}));
    ASSERT_EQ(off.status, 0) << off.err;
    EXPECT_FALSE(has(off.err, "offloading")) << off.err;
    EXPECT_EQ(on.out, off.out) << "greedy text differs between the GPU and the CPU";
}

TEST(VulkanMemoryPlan, BadEnvironmentValuesAreClearErrors) {
    const auto ngl = run_with("SPECULA_NGL", "lots", run_args({}));
    EXPECT_EQ(ngl.status, 1);
    EXPECT_TRUE(has(ngl.err, "SPECULA_NGL=lots: not a layer count")) << ngl.err;
    const auto mib = run_with("SPECULA_VULKAN_MEMORY_MIB", "-3", run_args({"-ngl", "99"}));
    EXPECT_EQ(mib.status, 1);
    EXPECT_TRUE(has(mib.err, "SPECULA_VULKAN_MEMORY_MIB=-3: not a positive number")) << mib.err;
}

}  // namespace
