// make_offload / plan_offload (see offload.h) over the registered DeviceBackend, and the
// environment's placement (SPECULA_NGL / SPECULA_NGLD).
#include "model/load/offload.h"

#include <cstdio>

#include "common/env.h"
#include "common/error.h"

namespace specula {

namespace {

const DeviceBackend* g_backend = nullptr;

Placement from_environment() {
    const EnvSettings& e = env_settings();
    Placement d;
    const bool set = e.ngl >= 0 || e.ngld >= 0;
    d.target.n_gpu_layers = e.ngl >= 0 ? e.ngl : 0;
    d.draft.n_gpu_layers = e.ngld >= 0 ? e.ngld : d.target.n_gpu_layers;
    d.target.required = d.draft.required = set;
    return d;
}

[[noreturn]] void no_device() {
    if (g_backend) {
        fail("SPECULA_NGL / SPECULA_NGLD ask for the GPU backend, but there is no ",
             g_backend->name(), " device (install mesa-vulkan-drivers for lavapipe)");
    }
    fail(
        "SPECULA_NGL / SPECULA_NGLD ask for the GPU backend, but this program has none (built "
        "without Vulkan: SPECULA_VULKAN=OFF)");
}

}  // namespace

const Placement& env_placement() {
    static const Placement d = from_environment();
    return d;
}

void register_device_backend(const DeviceBackend* b) {
    g_backend = b;
}

const DeviceBackend* device_backend() {
    return g_backend;
}

std::unique_ptr<LayerOffload> make_offload(const Model& m, const OffloadParams& p) {
    if (p.n_gpu_layers <= 0) return nullptr;
    if (p.required && (!g_backend || !g_backend->has_device())) no_device();
    if (!g_backend) {
        static bool said = false;
        if (!said) {
            std::fprintf(stderr,
                         "specula: no GPU backend (built without Vulkan: "
                         "SPECULA_VULKAN=OFF): running on the CPU\n");
            said = true;
        }
        return nullptr;
    }
    return g_backend->make(m, p);
}

OffloadPlan plan_offload(const Model& m, const OffloadParams& p) {
    if (p.n_gpu_layers > 0 && g_backend) return g_backend->plan(m, p);
    return {};
}

}  // namespace specula
