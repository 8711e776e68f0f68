// Vulkan instance and device selection (see context.h).
#include "vulkan/context.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "common/env.h"
#include "common/error.h"

namespace specula::vk {

namespace {

const char* type_name(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
            return "discrete GPU";
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
            return "integrated GPU";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
            return "virtual GPU";
        case VK_PHYSICAL_DEVICE_TYPE_CPU:
            return "CPU";
        default:
            return "other";
    }
}

VkInstance make_instance() {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "specula";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    VkInstance inst = VK_NULL_HANDLE;
    const VkResult r = vkCreateInstance(&ci, nullptr, &inst);
    if (r != VK_SUCCESS) return VK_NULL_HANDLE;
    return inst;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance inst) {
    uint32_t n = 0;
    if (vkEnumeratePhysicalDevices(inst, &n, nullptr) != VK_SUCCESS) return {};
    std::vector<VkPhysicalDevice> out(n);
    if (vkEnumeratePhysicalDevices(inst, &n, out.data()) != VK_SUCCESS) return {};
    out.resize(n);
    return out;
}

DeviceInfo describe(VkPhysicalDevice p, int index) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(p, &props);
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(p, &mem);
    DeviceInfo d;
    d.index = index;
    d.name = props.deviceName;
    d.type = type_name(props.deviceType);
    for (uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
        if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
            d.local_bytes = std::max<uint64_t>(d.local_bytes, mem.memoryHeaps[i].size);
        }
    }
    // SPECULA_VULKAN_MEMORY_MIB (common/env.h) caps what Specula counts on every device (a forced
    // small budget for tests of the memory plan, or to leave room for other programs on the GPU).
    if (const double mib = env_settings().vulkan_memory_mib; mib > 0) {
        d.local_bytes = std::min<uint64_t>(d.local_bytes, static_cast<uint64_t>(mib * (1 << 20)));
        d.capped = true;
    }
    d.api_version = std::to_string(VK_API_VERSION_MAJOR(props.apiVersion)) + "." +
                    std::to_string(VK_API_VERSION_MINOR(props.apiVersion)) + "." +
                    std::to_string(VK_API_VERSION_PATCH(props.apiVersion));
    return d;
}

}  // namespace

void check(VkResult r, const char* what) {
    if (r != VK_SUCCESS) fail("vulkan: ", what, " failed (VkResult ", static_cast<int>(r), ")");
}

std::vector<DeviceInfo> list_devices() {
    VkInstance inst = make_instance();
    if (!inst) return {};
    std::vector<DeviceInfo> out;
    const auto devs = physical_devices(inst);
    for (size_t i = 0; i < devs.size(); ++i) out.push_back(describe(devs[i], static_cast<int>(i)));
    vkDestroyInstance(inst, nullptr);
    return out;
}

Context::~Context() {
    if (device) {
        vkDeviceWaitIdle(device);
        if (pool) vkDestroyCommandPool(device, pool, nullptr);
        vkDestroyDevice(device, nullptr);
    }
    if (instance) vkDestroyInstance(instance, nullptr);
}

void Context::submit_and_wait(VkCommandBuffer cb) {
    std::lock_guard<std::recursive_mutex> lock(mu);
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    check(vkCreateFence(device, &fi, nullptr, &fence), "vkCreateFence");
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    VkResult r = vkQueueSubmit(queue, 1, &si, fence);
    if (r == VK_SUCCESS) r = vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX);
    vkDestroyFence(device, fence, nullptr);
    check(r, "vkQueueSubmit/vkWaitForFences");
}

namespace {

std::shared_ptr<Context> create(int index) {
    auto c = std::make_shared<Context>();
    c->instance = make_instance();
    if (!c->instance) fail("vulkan: no Vulkan loader or driver (vkCreateInstance failed)");
    const auto devs = physical_devices(c->instance);
    if (devs.empty()) fail("vulkan: no Vulkan device found");
    if (index >= static_cast<int>(devs.size())) {
        fail("--device ", index, ": there are only ", devs.size(),
             " Vulkan devices (see `specula info --devices`)");
    }
    if (index < 0) {  // the first discrete GPU, else the first hardware one, else the first
        int other = -1, software = -1;
        for (size_t i = 0; i < devs.size() && index < 0; ++i) {
            VkPhysicalDeviceProperties p;
            vkGetPhysicalDeviceProperties(devs[i], &p);
            if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) index = static_cast<int>(i);
            if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
                if (software < 0) software = static_cast<int>(i);
            } else if (other < 0) {
                other = static_cast<int>(i);
            }
        }
        if (index < 0) index = other >= 0 ? other : software;
    }
    c->phys = devs[index];
    c->info = describe(c->phys, index);
    vkGetPhysicalDeviceMemoryProperties(c->phys, &c->mem);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(c->phys, &props);
    c->limits = props.limits;
    if (props.apiVersion >= VK_API_VERSION_1_1) {
        VkPhysicalDeviceSubgroupProperties sg{
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
        VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        p2.pNext = &sg;
        vkGetPhysicalDeviceProperties2(c->phys, &p2);
        if ((sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
            (sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT)) {
            c->shuffle_lanes = sg.subgroupSize;
        }
    }

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &nq, qf.data());
    bool found = false;
    for (uint32_t i = 0; i < nq && !found; ++i) {
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            c->queue_family = i;
            found = true;
        }
    }
    if (!found) fail("vulkan: device '", c->info.name, "' has no compute queue");
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qi.queueFamilyIndex = c->queue_family;
    qi.queueCount = 1;
    qi.pQueuePriorities = &prio;
    VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    check(vkCreateDevice(c->phys, &di, nullptr, &c->device), "vkCreateDevice");
    vkGetDeviceQueue(c->device, c->queue_family, 0, &c->queue);
    VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = c->queue_family;
    check(vkCreateCommandPool(c->device, &pi, nullptr, &c->pool), "vkCreateCommandPool");
    return c;
}

}  // namespace

std::shared_ptr<Context> open_context(int index) {
    static std::mutex mu;
    static std::map<int, std::shared_ptr<Context>> open;  // kept for the process
    std::lock_guard<std::mutex> lock(mu);
    if (auto c = open[index]) return c;
    auto c = create(index);
    open[index] = c;
    return c;
}

}  // namespace specula::vk
