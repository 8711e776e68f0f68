// The model's weights on the device: for the offloaded layers every norm, bias and matrix in
// its GGUF layout (one storage buffer per tensor), and the output norm and head when all layers
// are offloaded. Uploaded once per (model, device, layer count) and shared by every Session.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gguf/ggml_types.h"
#include "model/load/model.h"
#include "vulkan/buffer.h"
#include "vulkan/pipeline.h"

namespace specula::vk {

struct DeviceMatrix {
    std::unique_ptr<Buffer> buf;
    GGMLType type = GGMLType::F32;
    uint32_t rows = 0, cols = 0;
    const WeightView* cpu = nullptr;  // a type without a shader: the CPU runs it (no buf)
};

struct DeviceLayer {
    std::unique_ptr<Buffer> attn_norm, ffn_norm, bq, bk, bv, bo;
    std::unique_ptr<Buffer> q_norm, k_norm;                 // per-head, head_dim (qwen3, gemma3)
    std::unique_ptr<Buffer> attn_post_norm, ffn_post_norm;  // gemma's post-norms, n_embd
    DeviceMatrix wq, wk, wv, wo, ffn_gate, ffn_up, ffn_down;
};

struct DeviceModel {
    std::shared_ptr<Context> ctx;
    Pipelines& pipelines;
    std::vector<DeviceLayer> layers;
    std::unique_ptr<Buffer> output_norm;
    DeviceMatrix output;   // rows == 0 when the head stays on the CPU
    size_t bytes = 0;      // weight bytes on the device
    bool any_cpu = false;  // some layer matrix runs on the CPU

    explicit DeviceModel(std::shared_ptr<Context> c) : ctx(c), pipelines(pipelines_for(c)) {}
};

// The matvec shader of a weight type, or nullptr when there is none.
const char* matvec_shader(GGMLType t);

// How many of the first `want` layers go to the device: min(want, n_layer), or none for an
// architecture without a device block, MoE, YaRN, soft-capping or head sizes over 256. A layer
// matrix whose type has no shader stays on the CPU (the rest of its layer on the device); *note
// names each such tensor and its type. *output is whether the output head goes too (all layers
// offloaded and a supported type).
int plan_layers(const Model& m, int want, bool* output, std::string* note);

// Bytes the weights of that plan take on the device (the CPU's matrices not counted).
size_t plan_bytes(const Model& m, int n_layers, bool output);

// The device copy for (m, ctx, n_layers, output), uploading it on first use.
std::shared_ptr<DeviceModel> device_model(const Model& m, const std::shared_ptr<Context>& ctx,
                                          int n_layers, bool output);

}  // namespace specula::vk
