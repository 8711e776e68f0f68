// Buffer allocation and upload (see buffer.h).
#include "vulkan/buffer.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace specula::vk {

namespace {

uint32_t pick_memory(const Context& c, uint32_t type_bits, VkMemoryPropertyFlags want,
                     VkMemoryPropertyFlags prefer) {
    int fallback = -1;
    for (uint32_t i = 0; i < c.mem.memoryTypeCount; ++i) {
        if (!(type_bits & (1u << i))) continue;
        const VkMemoryPropertyFlags f = c.mem.memoryTypes[i].propertyFlags;
        if ((f & want) != want) continue;
        if ((f & prefer) == prefer) return i;
        if (fallback < 0) fallback = static_cast<int>(i);
    }
    if (fallback < 0) fail("vulkan: device '", c.info.name, "' has no suitable memory type");
    return static_cast<uint32_t>(fallback);
}

}  // namespace

Buffer::Buffer(std::shared_ptr<Context> ctx, size_t bytes, Kind kind)
    : ctx_(std::move(ctx)), size_(std::max<size_t>(bytes, 16)) {
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = size_;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(vkCreateBuffer(ctx_->device, &bi, nullptr, &buf_), "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx_->device, buf_, &req);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    if (kind == Kind::Device) {
        ai.memoryTypeIndex =
            pick_memory(*ctx_, req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    } else {
        ai.memoryTypeIndex =
            pick_memory(*ctx_, req.memoryTypeBits,
                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                        VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    }
    const VkResult r = vkAllocateMemory(ctx_->device, &ai, nullptr, &mem_);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(ctx_->device, buf_, nullptr);
        fail("vulkan: cannot allocate ", req.size / (1 << 20), " MiB on '", ctx_->info.name,
             "' (VkResult ", static_cast<int>(r), ")");
    }
    vkBindBufferMemory(ctx_->device, buf_, mem_, 0);
    if (kind == Kind::Host) {
        check(vkMapMemory(ctx_->device, mem_, 0, VK_WHOLE_SIZE, 0, &mapped_), "vkMapMemory");
    }
}

Buffer::~Buffer() {
    if (mapped_) vkUnmapMemory(ctx_->device, mem_);
    vkDestroyBuffer(ctx_->device, buf_, nullptr);
    vkFreeMemory(ctx_->device, mem_, nullptr);
}

void Buffer::upload(const void* src, size_t bytes, size_t dst) {
    if (dst + bytes > size_) fail("vulkan: upload of ", bytes, " bytes past a buffer's end");
    if (mapped_) {
        std::memcpy(static_cast<char*>(mapped_) + dst, src, bytes);
        return;
    }
    // Staged in chunks so a large tensor needs no large host-visible allocation.
    const size_t chunk = std::min<size_t>(bytes, 64u << 20);
    Buffer staging(ctx_, chunk, Kind::Host);
    for (size_t off = 0; off < bytes; off += chunk) {
        const size_t n = std::min(chunk, bytes - off);
        std::memcpy(staging.mapped(), static_cast<const char*>(src) + off, n);
        ctx_->run_once([&](VkCommandBuffer cb) {
            VkBufferCopy region{0, dst + off, n};
            vkCmdCopyBuffer(cb, staging.handle(), buf_, 1, &region);
        });
    }
}

}  // namespace specula::vk
