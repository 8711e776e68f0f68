// The Vulkan DeviceBackend (model/load/offload.h): vulkan/ implements the seam model/ defines, and
// model/ never includes vulkan/. A program that wants layers on a Vulkan device calls
// register_backend() once at start-up, before loading models (the CLI's main does; so do the
// tests that run on the device).
#pragma once

#include "model/load/offload.h"

namespace specula::vk {

// The process' Vulkan backend (a stateless object; devices open on first use).
const DeviceBackend& backend();

// register_device_backend(&backend()).
void register_backend();

}  // namespace specula::vk
