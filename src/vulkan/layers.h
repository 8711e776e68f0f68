// The Vulkan LayerOffload (model/load/offload.h): runs layers [0, n) of a Session's pass on a
// Vulkan device with a device KV cache, and the output head too when every layer is offloaded.
// One command buffer is recorded per pass shape (token count, logit rows) and replayed; the
// position and the RoPE angles of a pass travel in a small host-visible buffer, and the inputs
// and results cross once each way per pass.
#pragma once

#include <memory>

#include "model/load/offload.h"

namespace specula::vk {

// nullptr (with one line on stderr, once per process) when there is no Vulkan device; throws
// Error when the plan does not fit in device memory or p.device names no device.
std::unique_ptr<LayerOffload> make_vulkan_layers(const Model& m, const OffloadParams& p);

// plan_offload (model/load/offload.h) on Vulkan: opens the device's context (to pick the device)
// but allocates nothing.
OffloadPlan plan_vulkan(const Model& m, const OffloadParams& p);

}  // namespace specula::vk
