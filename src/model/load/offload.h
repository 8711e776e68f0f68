// The backend seam of the forward pass: a LayerOffload runs the first n_layers() layers of a
// Session's pass (and, when has_output(), the final norm and the output head) on another
// device, so the hidden state crosses once per pass: the CPU embeds the tokens, the device runs
// its layers, and the CPU either runs the remaining layers or takes the logits. The device
// keeps the K/V rows of its layers; rows at positions >= the session's n_past are simply
// overwritten by later passes, so Session::rollback needs nothing from it.
//
// Promise of every implementation: a position's results do not depend on how many tokens share
// the pass (batch invariance), as for the CPU path.
#pragma once

#include <memory>
#include <string>

namespace specula {

class Model;
class ThreadPool;

struct OffloadParams {
    int n_gpu_layers = 0;  // layers to offload; >= n_layer offloads all and the output head
    int device = -1;       // Vulkan device index (-1: the first discrete GPU, else the first)
    int n_ctx = 0;         // the session's context (rows of the device KV cache)
    // No silent CPU fallback: an offload that cannot happen (no backend, no device) is an Error.
    bool required = false;
};

class LayerOffload {
  public:
    virtual ~LayerOffload() = default;
    virtual int n_layers() const = 0;
    virtual bool has_output() const = 0;
    // x: ntok rows of n_embd (the embedded tokens), cs: ntok rows of n_rot RoPE cos/sin pairs
    // (rope_angles) for positions pos0 .. pos0 + ntok - 1; cs_swa: the same rows for the
    // sliding-window layers when they rotate with a base of their own (gemma3), else null.
    // Afterwards either x holds the hidden state after layer n_layers() - 1, or (has_output())
    // logits holds the n_vocab logits of the last n_out tokens. `pool` runs the matrices the
    // device cannot (a type without a shader).
    virtual void forward(float* x, const float* cs, const float* cs_swa, int ntok, int pos0,
                         int n_out, float* logits, ThreadPool& pool) = 0;
};

// Where a target model and a draft model run their layers: a value, parsed once (the CLI's -ngl /
// -ngld / --device, cli/gpu_flags.h) and passed down to LoadOptions::gpu and
// SpeculativeConfig::draft_gpu.
struct Placement {
    OffloadParams target, draft;
};

// The placement the environment gives (common/env.h: SPECULA_NGL for target models, SPECULA_NGLD
// for drafts, default SPECULA_NGL), the default of LoadOptions and of the CLI's flags, so that
// test binaries and servers started by tests run on the GPU backend (CTest's *_vulkan entries);
// with either set, an offload that cannot happen is an Error, not a fallback. Never changes.
const Placement& env_placement();

// What make_offload(m, p) would put on the device, computed without touching it: the device
// chosen, the layers and head offloaded, and the device bytes of the weights and of one
// session's KV cache of p.n_ctx positions. n_layers == 0 when nothing would be offloaded (note
// says why when it is not simply p.n_gpu_layers <= 0).
struct OffloadPlan {
    int device = -1;
    std::string device_name;
    double device_bytes = 0;  // the device's memory (SPECULA_VULKAN_MEMORY_MIB caps it)
    int n_layers = 0;
    bool output = false;
    double weight_bytes = 0, kv_bytes = 0;
    std::string note;
};
OffloadPlan plan_offload(const Model& m, const OffloadParams& p);

// A device backend: the other side of the seam. model/ never names one; a program that wants one
// (the CLI, a Vulkan test) registers it before loading models: vulkan/backend.h's
// vk::register_backend(). Implementations must be usable from several threads.
class DeviceBackend {
  public:
    virtual ~DeviceBackend() = default;
    virtual const char* name() const = 0;  // "Vulkan"
    // Whether any device is there (false: no driver, no device).
    virtual bool has_device() const = 0;
    virtual OffloadPlan plan(const Model& m, const OffloadParams& p) const = 0;
    // nullptr when nothing goes to the device (one line on stderr says why).
    virtual std::unique_ptr<LayerOffload> make(const Model& m, const OffloadParams& p) const = 0;
};

// The registered backend (null: none, everything runs on the CPU). Not thread-safe: register
// once at start-up.
void register_device_backend(const DeviceBackend* b);
const DeviceBackend* device_backend();

// The offload for `p` on the registered backend, or nullptr when p.n_gpu_layers <= 0, when no
// backend is registered (built without Vulkan), or when it has no device (one line on stderr
// says so, once per process; an Error instead when p.required).
// Throws Error when the offloaded part does not fit in the device's memory (naming the sizes)
// or --device names no device.
std::unique_ptr<LayerOffload> make_offload(const Model& m, const OffloadParams& p);

}  // namespace specula
