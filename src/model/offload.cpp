// make_offload / plan_offload (see offload.h): the Vulkan backend when it was built, else the
// CPU; the process defaults, started from SPECULA_NGL / SPECULA_NGLD.
#include "model/offload.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.h"

#ifdef SPECULA_HAVE_VULKAN
#include "vulkan/context.h"
#include "vulkan/layers.h"
#endif

namespace specula {

namespace {

// The layer count in environment variable `name`, or `dflt` when it is unset.
int env_layers(const char* name, int dflt, bool* set) {
    const char* v = std::getenv(name);
    if (!v || !*v) return dflt;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end || n < 0 || n > 1000000) fail(name, "=", v, ": not a layer count (an integer >= 0)");
    *set = true;
    return static_cast<int>(n);
}

OffloadDefaults from_environment() {
    OffloadDefaults d;
    d.target.n_gpu_layers = env_layers("SPECULA_NGL", 0, &d.required);
    d.draft.n_gpu_layers = env_layers("SPECULA_NGLD", d.target.n_gpu_layers, &d.required);
    return d;
}

[[noreturn]] void no_device() {
    fail("SPECULA_NGL / SPECULA_NGLD ask for the GPU backend, but ",
#ifdef SPECULA_HAVE_VULKAN
         "there is no Vulkan device (install mesa-vulkan-drivers for lavapipe)"
#else
         "Specula was built without Vulkan (SPECULA_VULKAN=OFF)"
#endif
    );
}

}  // namespace

OffloadDefaults& offload_defaults() {
    static OffloadDefaults d = from_environment();
    return d;
}

std::unique_ptr<LayerOffload> make_offload(const Model& m, const OffloadParams& p) {
    if (p.n_gpu_layers <= 0) return nullptr;
#ifdef SPECULA_HAVE_VULKAN
    if (offload_defaults().required && vk::list_devices().empty()) no_device();
    return vk::make_vulkan_layers(m, p);
#else
    if (offload_defaults().required) no_device();
    static bool said = false;
    if (!said) {
        std::fprintf(stderr,
                     "specula: built without Vulkan (SPECULA_VULKAN=OFF): running on the CPU\n");
        said = true;
    }
    return nullptr;
#endif
}

OffloadPlan plan_offload(const Model& m, const OffloadParams& p) {
#ifdef SPECULA_HAVE_VULKAN
    if (p.n_gpu_layers > 0) return vk::plan_vulkan(m, p);
#else
    (void)m;
#endif
    return {};
}

}  // namespace specula
