// Compute pipelines made from the embedded SPIR-V (spirv.h): every shader takes its buffers as
// storage buffers at bindings 0..n-1 of set 0 and its sizes as push constants. Pipelines
// creates each one on first use and keeps it as long as its Context lives (pipelines_for():
// one set per Context, for the whole process, since compiling a pipeline is slow on some
// drivers). Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "vulkan/context.h"

namespace specula::vk {

struct Pipeline {
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
    int n_bindings = 0;
    uint32_t push_bytes = 0;
};

class Pipelines {
  public:
    explicit Pipelines(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {}
    ~Pipelines();
    Pipelines(const Pipelines&) = delete;
    Pipelines& operator=(const Pipelines&) = delete;

    // The pipeline of shader `name` with `n_bindings` buffers and `push_bytes` of push
    // constants. Throws Error when no shader has that name.
    const Pipeline& get(const std::string& name, int n_bindings, uint32_t push_bytes);

  private:
    std::shared_ptr<Context> ctx_;
    std::mutex mu_;
    std::map<std::string, Pipeline> cache_;
};

Pipelines& pipelines_for(const std::shared_ptr<Context>& ctx);

}  // namespace specula::vk
