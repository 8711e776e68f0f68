// The Vulkan DeviceBackend (see backend.h): device discovery from context.h, the plan and the
// layer pass from layers.h.
#include "vulkan/backend.h"

#include "vulkan/context.h"
#include "vulkan/layers.h"

namespace specula::vk {

namespace {

class VulkanBackend final : public DeviceBackend {
  public:
    const char* name() const override { return "Vulkan"; }
    bool has_device() const override { return !list_devices().empty(); }
    OffloadPlan plan(const Model& m, const OffloadParams& p) const override {
        return plan_vulkan(m, p);
    }
    std::unique_ptr<LayerOffload> make(const Model& m, const OffloadParams& p) const override {
        return make_vulkan_layers(m, p);
    }
};

}  // namespace

const DeviceBackend& backend() {
    static const VulkanBackend b;
    return b;
}

void register_backend() {
    register_device_backend(&backend());
}

}  // namespace specula::vk
