// -ngl / -ngld / --device and `info --devices` (see gpu_flags.h).
#include "cli/gpu_flags.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/error.h"
#include "model/load/offload.h"
#ifdef SPECULA_HAVE_VULKAN
#include "vulkan/context.h"
#endif

namespace specula::cli {

void add_gpu_options(CLI::App& cmd, GpuFlags& f) {
    const char* group = "GPU (Vulkan)";
    // Unset flags keep the environment's defaults (SPECULA_NGL / SPECULA_NGLD,
    // model/load/offload.h).
    const Placement& d = env_placement();
    f.n_gpu_layers = d.target.n_gpu_layers;
    f.n_gpu_layers_draft =
        d.draft.n_gpu_layers == d.target.n_gpu_layers ? -1 : d.draft.n_gpu_layers;
    cmd.add_option("--n-gpu-layers,--gpu-layers", f.n_gpu_layers,
                   "layers of the model on the GPU (>= the layer count: all, and the output head)")
        ->group(group)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    cmd.add_option("--n-gpu-layers-draft,--gpu-layers-draft", f.n_gpu_layers_draft,
                   "layers of the draft model on the GPU (default: as --n-gpu-layers)")
        ->group(group)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    cmd.add_option("--device", f.device,
                   "Vulkan device: an index or VulkanN from `specula info --devices`, or none")
        ->group(group)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

namespace {

// -1 for "pick one", -2 for none.
int parse_device(const std::string& s) {
    if (s.empty()) return -1;
    if (s == "none") return -2;
    std::string digits = s;
    if (digits.rfind("Vulkan", 0) == 0 || digits.rfind("vulkan", 0) == 0) digits = s.substr(6);
    if (digits.empty() || digits.size() > 4 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
        fail("--device ", s,
             ": not a Vulkan device (give an index or VulkanN from `specula info --devices`, or "
             "none)");
    }
    return std::stoi(digits);
}

#ifdef SPECULA_HAVE_VULKAN
// -ngl / -ngld without --device: the first discrete GPU, else the first other hardware one; never
// a software device (VkPhysicalDeviceType CPU, e.g. Mesa's lavapipe, ~200x slower than the CPU
// backend). With only software devices the layers stay on the CPU, said in one line.
void choose_hardware_device(Placement& d) {
    const auto devs = vk::list_devices();
    int hw = -1;
    for (const auto& x : devs)
        if (hw < 0 && x.type == "discrete GPU") hw = x.index;
    for (const auto& x : devs)
        if (hw < 0 && x.type != "CPU") hw = x.index;
    if (hw >= 0) {
        d.target.device = d.draft.device = hw;
    } else if (!devs.empty()) {
        std::fprintf(stderr,
                     "specula: no hardware GPU: -ngl runs on the CPU backend (Vulkan%d '%s' is a "
                     "software device; --device Vulkan%d uses it)\n",
                     devs[0].index, devs[0].name.c_str(), devs[0].index);
        d.target.n_gpu_layers = d.draft.n_gpu_layers = 0;
    }
}
#endif

}  // namespace

Placement parse_gpu_flags(const GpuFlags& f) {
    if (f.n_gpu_layers < 0) fail("--n-gpu-layers must be >= 0, got ", f.n_gpu_layers);
    if (f.n_gpu_layers_draft < -1) {
        fail("--n-gpu-layers-draft must be >= 0, got ", f.n_gpu_layers_draft);
    }
    const int device = parse_device(f.device);
#ifdef SPECULA_HAVE_VULKAN
    // A device index that names nothing fails here, before any model loads.
    if (device >= 0 && (f.n_gpu_layers > 0 || f.n_gpu_layers_draft > 0)) {
        const size_t n = vk::list_devices().size();
        if (size_t(device) >= n)
            fail("--device ", f.device, ": there are only ", n,
                 " Vulkan devices (see `specula info --devices`)");
    }
#endif
    Placement d = env_placement();
    const bool none = device == -2;
    d.target.n_gpu_layers = none ? 0 : f.n_gpu_layers;
    d.draft.n_gpu_layers = none                       ? 0
                           : f.n_gpu_layers_draft < 0 ? f.n_gpu_layers
                                                      : f.n_gpu_layers_draft;
    d.target.device = d.draft.device = none ? -1 : device;
#ifdef SPECULA_HAVE_VULKAN
    if (device == -1 && (d.target.n_gpu_layers > 0 || d.draft.n_gpu_layers > 0) &&
        !d.target.required)
        choose_hardware_device(d);
#endif
    return d;
}

int print_devices() {
#ifdef SPECULA_HAVE_VULKAN
    const auto devs = vk::list_devices();
    if (devs.empty()) {
        std::printf("no Vulkan device (no loader, driver or device): everything runs on the CPU\n");
        return 0;
    }
    for (const auto& d : devs) {
        std::printf("Vulkan%d: %s (%s, Vulkan %s), %.0f MiB device memory\n", d.index,
                    d.name.c_str(), d.type.c_str(), d.api_version.c_str(),
                    static_cast<double>(d.local_bytes) / (1 << 20));
    }
#else
    std::printf("built without Vulkan (SPECULA_VULKAN=OFF): everything runs on the CPU\n");
#endif
    return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace specula::cli
