// Pipeline creation from embedded SPIR-V (see pipeline.h).
#include "vulkan/pipeline.h"

#include <vector>

#include "common/error.h"
#include "vulkan/spirv.h"

namespace specula::vk {

Pipelines::~Pipelines() {
    for (auto& [name, p] : cache_) {
        vkDestroyPipeline(ctx_->device, p.pipeline, nullptr);
        vkDestroyPipelineLayout(ctx_->device, p.layout, nullptr);
        vkDestroyDescriptorSetLayout(ctx_->device, p.set_layout, nullptr);
    }
}

Pipelines& pipelines_for(const std::shared_ptr<Context>& ctx) {
    static std::mutex mu;
    static std::map<const Context*, std::unique_ptr<Pipelines>> all;
    std::lock_guard<std::mutex> lock(mu);
    auto& p = all[ctx.get()];
    if (!p) p = std::make_unique<Pipelines>(ctx);
    return *p;
}

const Pipeline& Pipelines::get(const std::string& name, int n_bindings, uint32_t push_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(name);
    if (it != cache_.end()) return it->second;
    const SpirvBlob* blob = find_spirv(name);
    if (!blob) fail("vulkan: no embedded shader named '", name, "'");
    Pipeline p;
    p.n_bindings = n_bindings;
    p.push_bytes = push_bytes;
    std::vector<VkDescriptorSetLayoutBinding> b(n_bindings);
    for (int i = 0; i < n_bindings; ++i) {
        b[i] = {};
        b[i].binding = static_cast<uint32_t>(i);
        b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        b[i].descriptorCount = 1;
        b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dl.bindingCount = static_cast<uint32_t>(n_bindings);
    dl.pBindings = b.data();
    check(vkCreateDescriptorSetLayout(ctx_->device, &dl, nullptr, &p.set_layout),
          "vkCreateDescriptorSetLayout");
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &p.set_layout;
    pl.pushConstantRangeCount = push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &range;
    check(vkCreatePipelineLayout(ctx_->device, &pl, nullptr, &p.layout), "vkCreatePipelineLayout");
    VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    sm.codeSize = blob->n_words * 4;
    sm.pCode = blob->words;
    VkShaderModule mod;
    check(vkCreateShaderModule(ctx_->device, &sm, nullptr, &mod), "vkCreateShaderModule");
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = mod;
    ci.stage.pName = "main";
    ci.layout = p.layout;
    const VkResult r =
        vkCreateComputePipelines(ctx_->device, VK_NULL_HANDLE, 1, &ci, nullptr, &p.pipeline);
    vkDestroyShaderModule(ctx_->device, mod, nullptr);
    check(r, "vkCreateComputePipelines");
    return cache_.emplace(name, p).first->second;
}

}  // namespace specula::vk
