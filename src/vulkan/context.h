// The Vulkan instance, the chosen physical device, its logical device, one compute queue and a
// command pool. list_devices() enumerates the physical devices (for `specula info --devices`
// and --device); open_context() creates (once per process and device index) the shared Context
// every backend object uses. Errors throw specula::Error naming the Vulkan call and its result.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace specula::vk {

struct DeviceInfo {
    int index = 0;
    std::string name;
    std::string type;          // "discrete GPU", "integrated GPU", "CPU", ...
    uint64_t local_bytes = 0;  // the largest DEVICE_LOCAL heap (capped: see below)
    bool capped = false;       // local_bytes is SPECULA_VULKAN_MEMORY_MIB's cap
    std::string api_version;   // "1.3.230"
};

// Throws Error naming `what` when r is not VK_SUCCESS.
void check(VkResult r, const char* what);

// Every Vulkan physical device; empty when there is no loader, no driver or no device.
std::vector<DeviceInfo> list_devices();

struct Context {
    VkInstance instance = VK_NULL_HANDLE;
    VkPhysicalDevice phys = VK_NULL_HANDLE;
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    uint32_t queue_family = 0;
    VkCommandPool pool = VK_NULL_HANDLE;
    VkPhysicalDeviceMemoryProperties mem{};
    VkPhysicalDeviceLimits limits{};
    // The subgroup size when compute shaders have subgroupShuffleXor (Vulkan 1.1's shuffle
    // operations), else 0: attention_split.comp adds a score's parts across up to 8 lanes.
    uint32_t shuffle_lanes = 0;
    DeviceInfo info;
    // Guards the command pool and the queue (sessions on several threads share one Context).
    std::recursive_mutex mu;

    Context() = default;
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    ~Context();

    // Runs `record` into a one-time command buffer, submits it and waits.
    template <class F>
    void run_once(F&& record);
    void submit_and_wait(VkCommandBuffer cb);
};

// The shared context of device `index` (-1: the first discrete GPU, else the first device),
// created on first use and kept until the process exits.
// Throws Error when there is no such device.
std::shared_ptr<Context> open_context(int index);

template <class F>
void Context::run_once(F&& record) {
    std::lock_guard<std::recursive_mutex> lock(mu);
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBuffer cb;
    check(vkAllocateCommandBuffers(device, &ai, &cb), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkBeginCommandBuffer(cb, &bi);
    record(cb);
    vkEndCommandBuffer(cb);
    submit_and_wait(cb);
    vkFreeCommandBuffers(device, pool, 1, &cb);
}

}  // namespace specula::vk
