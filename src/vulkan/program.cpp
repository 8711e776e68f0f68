// Command recording and replay (see program.h).
#include "vulkan/program.h"

#include "common/error.h"

namespace specula::vk {

namespace {

constexpr int kSetsPerPool = 256;
constexpr int kMaxBindings = 6;

void barrier(VkCommandBuffer cb, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = dst_access;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void check_bindings(const Pipeline& p, size_t n) {
    if (static_cast<int>(n) != p.n_bindings || p.n_bindings > kMaxBindings) {
        fail("vulkan: dispatch with ", n, " buffers for a ", p.n_bindings, "-binding pipeline");
    }
}

}  // namespace

Program::Program(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {
    std::lock_guard<std::recursive_mutex> lock(ctx_->mu);
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = ctx_->pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(ctx_->device, &ai, &cb_), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    check(vkBeginCommandBuffer(cb_, &bi), "vkBeginCommandBuffer");
}

Program::~Program() {
    std::lock_guard<std::recursive_mutex> lock(ctx_->mu);
    vkFreeCommandBuffers(ctx_->device, ctx_->pool, 1, &cb_);
    for (VkDescriptorPool p : pools_) vkDestroyDescriptorPool(ctx_->device, p, nullptr);
}

VkDescriptorSet Program::allocate(const Pipeline& p) {
    if (pool_left_ == 0) {
        VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kMaxBindings};
        VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
        pi.maxSets = kSetsPerPool;
        pi.poolSizeCount = 1;
        pi.pPoolSizes = &size;
        VkDescriptorPool pool;
        check(vkCreateDescriptorPool(ctx_->device, &pi, nullptr, &pool), "vkCreateDescriptorPool");
        pools_.push_back(pool);
        pool_left_ = kSetsPerPool;
    }
    --pool_left_;
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pools_.back();
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &p.set_layout;
    VkDescriptorSet set;
    check(vkAllocateDescriptorSets(ctx_->device, &ai, &set), "vkAllocateDescriptorSets");
    return set;
}

void Program::bind(const Pipeline& p, std::initializer_list<const Buffer*> buffers,
                   const void* push) {
    check_bindings(p, buffers.size());
    const VkDescriptorSet set = allocate(p);
    VkDescriptorBufferInfo info[kMaxBindings];
    VkWriteDescriptorSet wr[kMaxBindings];
    int i = 0;
    for (const Buffer* b : buffers) {
        info[i] = {b->handle(), 0, VK_WHOLE_SIZE};
        wr[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        wr[i].dstSet = set;
        wr[i].dstBinding = static_cast<uint32_t>(i);
        wr[i].descriptorCount = 1;
        wr[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        wr[i].pBufferInfo = &info[i];
        ++i;
    }
    vkUpdateDescriptorSets(ctx_->device, static_cast<uint32_t>(i), wr, 0, nullptr);
    vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    if (p.push_bytes) {
        vkCmdPushConstants(cb_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, push);
    }
}

void Program::dispatch(const Pipeline& p, std::initializer_list<const Buffer*> buffers,
                       const void* push, uint32_t gx, uint32_t gy, uint32_t gz) {
    check_bindings(p, buffers.size());
    if (gx == 0 || gy == 0 || gz == 0) return;
    bind(p, buffers, push);
    const uint32_t max_x = ctx_->limits.maxComputeWorkGroupCount[0];
    if (gx > max_x) {
        if (gy != 1) fail("vulkan: a dispatch of ", gx, " x ", gy, " workgroups is too large");
        gy = (gx + max_x - 1) / max_x;
        gx = max_x;
    }
    vkCmdDispatch(cb_, gx, gy, gz);
    barrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT);
}

void Program::dispatch_indirect(const Pipeline& p, std::initializer_list<const Buffer*> buffers,
                                const void* push, const Buffer& args, size_t offset) {
    bind(p, buffers, push);
    vkCmdDispatchIndirect(cb_, args.handle(), offset);
    barrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT);
}

void Program::copy(const Buffer& src, size_t src_off, const Buffer& dst, size_t dst_off,
                   size_t bytes) {
    VkBufferCopy region{src_off, dst_off, bytes};
    vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &region);
    barrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT);
}

void Program::finish() {
    barrier(cb_, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    check(vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
}

void Program::run() {
    ctx_->submit_and_wait(cb_);
}

}  // namespace specula::vk
