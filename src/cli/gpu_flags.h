// The GPU options of every `specula` command: -ngl / --n-gpu-layers (target layers on the
// device; all of them and the output head when N >= the layer count), -ngld /
// --n-gpu-layers-draft (the draft model's; default: the same as -ngl), --device (a Vulkan device
// index or "VulkanN" from `specula info --devices`, or "none"). parse_gpu_flags() checks them and
// gives the placement the command passes down (LoadOptions::gpu, SpeculativeConfig::draft_gpu).
// Without --device, -ngl / -ngld pick a hardware GPU (discrete first) and never a software
// Vulkan device (lavapipe: VkPhysicalDeviceType CPU): with only those, the layers run on the CPU
// backend with one line saying so; --device VulkanN names one to use it. SPECULA_NGL /
// SPECULA_NGLD (the GPU tests' switch) keep the Vulkan backend's own choice, lavapipe included.
#pragma once

#include <string>

#include "model/load/offload.h"

namespace CLI {
class App;
}

namespace specula::cli {

struct GpuFlags {
    int n_gpu_layers = 0;
    int n_gpu_layers_draft = -1;  // -1: follows -ngl
    std::string device;           // empty: pick one
};

// Also starts f from the environment's defaults (SPECULA_NGL / SPECULA_NGLD): the flags override
// them.
void add_gpu_options(CLI::App& cmd, GpuFlags& f);

// The placement of the flags (unset ones keep the environment's, model/load/offload.h). Throws
// Error naming the flag for a negative layer count or a device that is not a Vulkan index.
Placement parse_gpu_flags(const GpuFlags& f);

// `specula info --devices`: one line per Vulkan device with its memory (or the reason there is
// none).
int print_devices();

}  // namespace specula::cli
