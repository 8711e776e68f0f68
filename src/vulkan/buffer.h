// Device buffers: storage buffers in DEVICE_LOCAL memory (weights, activations, the KV cache)
// filled through a staging copy, and mapped HOST_VISIBLE | HOST_COHERENT buffers for what the
// host writes or reads every pass (inputs, per-pass parameters, results).
#pragma once

#include <cstddef>
#include <memory>

#include "vulkan/context.h"

namespace specula::vk {

class Buffer {
  public:
    enum class Kind { Device, Host };
    Buffer(std::shared_ptr<Context> ctx, size_t bytes, Kind kind);
    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    VkBuffer handle() const { return buf_; }
    size_t size() const { return size_; }
    void* mapped() const { return mapped_; }  // Host buffers only

    // Copies `bytes` from host memory to offset `dst` (through a staging buffer for Device).
    void upload(const void* src, size_t bytes, size_t dst = 0);

  private:
    std::shared_ptr<Context> ctx_;
    VkBuffer buf_ = VK_NULL_HANDLE;
    VkDeviceMemory mem_ = VK_NULL_HANDLE;
    size_t size_ = 0;
    void* mapped_ = nullptr;
};

}  // namespace specula::vk
