// make_offload (see offload.h): the Vulkan backend when it was built, else the CPU.
#include "model/offload.h"

#include <cstdio>

#ifdef SPECULA_HAVE_VULKAN
#include "vulkan/layers.h"
#endif

namespace specula {

OffloadDefaults& offload_defaults() {
    static OffloadDefaults d;
    return d;
}

std::unique_ptr<LayerOffload> make_offload(const Model& m, const OffloadParams& p) {
    if (p.n_gpu_layers <= 0) return nullptr;
#ifdef SPECULA_HAVE_VULKAN
    return vk::make_vulkan_layers(m, p);
#else
    static bool said = false;
    if (!said) {
        std::fprintf(stderr,
                     "specula: built without Vulkan (SPECULA_VULKAN=OFF): running on the CPU\n");
        said = true;
    }
    return nullptr;
#endif
}

}  // namespace specula
