// A recorded command buffer: a fixed sequence of dispatches (each with its own descriptor set
// and push constants) separated by compute barriers, replayed by run() as often as wanted. The
// backend records one Program per pass shape and reuses it; what changes from pass to pass
// (the position, the RoPE angles, the inputs) lives in host-visible buffers the shaders read.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "vulkan/buffer.h"
#include "vulkan/pipeline.h"

namespace specula::vk {

class Program {
  public:
    explicit Program(std::shared_ptr<Context> ctx);
    ~Program();
    Program(const Program&) = delete;
    Program& operator=(const Program&) = delete;

    // Appends a dispatch of `groups` workgroups (x may exceed the device limit: it is split
    // over y, and shaders recover the index as y * gridX + x) followed by a barrier.
    void dispatch(const Pipeline& p, std::initializer_list<const Buffer*> buffers, const void* push,
                  uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
    // The same with the workgroup counts read at run time from three uint32_t of `args` at
    // byte `offset` (what the host wrote there before run()).
    void dispatch_indirect(const Pipeline& p, std::initializer_list<const Buffer*> buffers,
                           const void* push, const Buffer& args, size_t offset);
    void copy(const Buffer& src, size_t src_off, const Buffer& dst, size_t dst_off, size_t bytes);
    // Ends recording (a barrier that makes shader and copy writes visible to the host).
    void finish();
    void run();

  private:
    std::shared_ptr<Context> ctx_;
    VkCommandBuffer cb_ = VK_NULL_HANDLE;
    std::vector<VkDescriptorPool> pools_;
    int pool_left_ = 0;
    VkDescriptorSet allocate(const Pipeline& p);
    void bind(const Pipeline& p, std::initializer_list<const Buffer*> buffers, const void* push);
};

}  // namespace specula::vk
