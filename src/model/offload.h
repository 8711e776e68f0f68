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
};

class LayerOffload {
  public:
    virtual ~LayerOffload() = default;
    virtual int n_layers() const = 0;
    virtual bool has_output() const = 0;
    // x: ntok rows of n_embd (the embedded tokens), cs: ntok rows of n_rot RoPE cos/sin pairs
    // (rope_angles) for positions pos0 .. pos0 + ntok - 1. Afterwards either x holds the hidden
    // state after layer n_layers() - 1, or (has_output()) logits holds the n_vocab logits of the
    // last n_out tokens. `pool` runs the matrices the device cannot (a type without a shader).
    virtual void forward(float* x, const float* cs, int ntok, int pos0, int n_out, float* logits,
                         ThreadPool& pool) = 0;
};

// Process-wide defaults, set once by the CLI from -ngl / -ngld / --device before any model is
// loaded: Model::load gives every model `target` as its Model::offload, and the speculative
// setup gives a draft model `draft` (make_drafter.cpp). Both are "everything on the CPU" unless
// set. The environment gives the starting values, which the flags override: SPECULA_NGL (target
// layers) and SPECULA_NGLD (draft layers; default SPECULA_NGL), so that test binaries and
// servers started by tests run on the GPU backend (CTest's *_vulkan entries). With either set,
// an offload that cannot happen for want of a Vulkan device is an Error, not a fallback.
struct OffloadDefaults {
    OffloadParams target, draft;
    bool required = false;  // set from the environment: no silent CPU fallback
};
OffloadDefaults& offload_defaults();

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

// The offload for `p`, or nullptr when p.n_gpu_layers <= 0, when Specula was built without
// Vulkan, or when there is no Vulkan device (one line on stderr says so, once per process).
// Throws Error when the offloaded part does not fit in the device's memory (naming the sizes)
// or --device names no device.
std::unique_ptr<LayerOffload> make_offload(const Model& m, const OffloadParams& p);

}  // namespace specula
