// The architecture registry: the one place an architecture is added. Each architecture lives in
// one file, model/arch/<name>.cpp, which says three things over the shared blocks:
//   - read:  the `{arch}.*` hyperparameters it reads (model/hparams.h readers) and the choices
//            they imply (rope style, whether experts are allowed);
//   - bind:  its tensors, names, shapes and which are optional (model/weights.h);
//   - block: one layer of its forward pass, a few calls to the blocks of model/forward_pass.h
//            (attention input, rope + cache, attention output, FFN or MoE).
// To add one: write model/arch/<name>.cpp defining an `extern const ArchSpec k<Name>Arch`, declare
// it below and list it in kArchs (arch.cpp). A block step the shared ones lack (a per-head Q/K
// norm, a sliding window) goes into ForwardPass as a new step the other blocks do not call.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace specula {

class ForwardPass;

struct ArchSpec {
    const char* name;  // general.architecture
    // Fills hp from f; hp.arch and hp.n_vocab are set already. Throws Error naming the key.
    void (*read)(const GGUFFile& f, HParams& hp);
    // Binds every tensor the block reads into w (TensorBinder checks shape and type).
    void (*bind)(TensorBinder& b, const HParams& hp, ModelWeights& w);
    // Runs layer `l` of the pass (the pass knows the layer index and which rows it finishes).
    void (*block)(ForwardPass& pass, const LayerWeights& l);
    // The device backend runs this architecture's layers: its block is the llama block with any
    // of the pieces the device has (vulkan/layers.cpp: per-head Q/K norm, post-norms, GeGLU,
    // sliding windows with their own rope base); hparams the device lacks (MoE, YaRN,
    // soft-capping) still keep a model on the CPU with a note.
    bool device_block;
    // Binds the MTP (nextn) head, blk.(n_layer + n_nextn - 1).*, into w.mtp; null: the
    // architecture has none. Model::load calls it for the file's own head (inside bind) and for
    // a sidecar's (model/model.h's LoadOptions::mtp_sidecar).
    void (*bind_mtp)(TensorBinder& b, const HParams& hp, ModelWeights& w) = nullptr;
};

extern const ArchSpec kLlamaArch;      // model/arch/llama.cpp (Llama 1-3, Mistral, Mixtral)
extern const ArchSpec kQwen2Arch;      // model/arch/qwen2.cpp
extern const ArchSpec kQwen3Arch;      // model/arch/qwen3.cpp
extern const ArchSpec kQwen3MoeArch;   // model/arch/qwen3.cpp
extern const ArchSpec kGemma2Arch;     // model/arch/gemma.cpp
extern const ArchSpec kGemma3Arch;     // model/arch/gemma.cpp
extern const ArchSpec kGptOssArch;     // model/arch/gpt_oss.cpp
extern const ArchSpec kPhi3Arch;       // model/arch/phi3.cpp (Phi-3, Phi-4)
extern const ArchSpec kMistral3Arch;   // model/arch/mistral3.cpp (Ministral 3)
extern const ArchSpec kQwen35Arch;     // model/arch/qwen35.cpp (Qwen3.5 / 3.6 hybrid)
extern const ArchSpec kQwen35MoeArch;  // model/arch/qwen35.cpp

// Every supported architecture, in the order the error message lists them.
std::span<const ArchSpec* const> archs();

// The architecture named `name`; throws Error "<path>: unsupported architecture '<name>'
// (supported: ...)".
const ArchSpec& find_arch(std::string_view name, const std::string& path);

// Llama's pieces (model/arch/llama.cpp), which other architectures reuse.
// The llama hyperparameters: base, attention, rope and expert keys; normal rope.
void read_llama_hparams(const GGUFFile& f, HParams& hp);
// token_embd / output_norm / output / rope_freqs, and per layer the attention (Q/K/V biases as
// `qkv_bias` says) and the FFN (dense or MoE).
void bind_llama_tensors(TensorBinder& b, const HParams& hp, Need qkv_bias, ModelWeights& w);
// The pre-norm llama block:
//   x += Wo attention(rope(Wq h), rope(Wk h), Wv h)   with h = rms_norm(x) * attn_norm
//   x += FFN(rms_norm(x) * ffn_norm)                   (dense SwiGLU, or MoE when bound)
// Biases the architecture bound are added where they belong.
void llama_block(ForwardPass& pass, const LayerWeights& l);

}  // namespace specula
