// The architecture registry: the one place an architecture is added. Each architecture lives in
// one file, model/arch/<name>.cpp, which says three things over the shared blocks:
//   - read:  the `{arch}.*` hyperparameters it reads (model/load/hparams.h readers) and the choices
//            they imply (rope style, whether experts are allowed);
//   - bind:  its tensors, names, shapes and which are optional (model/load/weights.h);
//   - block: one layer of its forward pass over the pass's state (model/blocks/pass_state.h):
//            calls to the shared blocks (model/blocks/blocks.h: attention input, rope + cache,
//            attention, FFN or MoE, DeltaNet) and steps of its own, written in its file over the
//            same state, with buffers of its own (`scratch`) when the shared ones do not fit.
// and, where it has them, what drafters take from its passes (the hooks below).
// To add one: write model/arch/<name>.cpp defining an `extern const ArchSpec k<Name>Arch`, declare
// it below and list it in kArchs (arch.cpp). Only a block other architectures will share (a new
// kind of attention or FFN) goes into model/blocks/blocks.h.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "model/load/hparams.h"
#include "model/load/weights.h"

namespace specula {

struct PassState;

struct ArchSpec {
    const char* name;  // general.architecture
    // Fills hp from f; hp.arch and hp.n_vocab are set already. Throws Error naming the key.
    void (*read)(const GGUFFile& f, HParams& hp);
    // Binds every tensor the block reads into w (TensorBinder checks shape and type).
    void (*bind)(TensorBinder& b, const HParams& hp, ModelWeights& w);
    // Runs layer `l` of the pass (the state knows the layer index and which rows it finishes).
    void (*block)(PassState& st, const LayerWeights& l);
    // The device backend runs this architecture's layers: its block is the llama block with any
    // of the pieces the device has (vulkan/layers.cpp: per-head Q/K norm, post-norms, GeGLU,
    // sliding windows with their own rope base); hparams the device lacks (MoE, YaRN,
    // soft-capping) still keep a model on the CPU with a note.
    bool device_block;
    // Binds the MTP (nextn) head, blk.(n_layer + n_nextn - 1).*, into w.mtp; null: the
    // architecture has none. Model::load calls it for the file's own head (inside bind) and for
    // a sidecar's (model/load/model.h's LoadOptions::mtp_sidecar).
    void (*bind_mtp)(TensorBinder& b, const HParams& hp, ModelWeights& w) = nullptr;

    // --- What drafters take from a pass ---
    // The MTP head's layer over its input rows (x = eh_proj [enorm(embed) | hnorm(hidden)], the
    // pass in MTP mode: PassState::mtp, attention over each session's head cache). The driver
    // (model/forward_mtp.cpp) makes the input rows and the head's output around it. Null: the
    // architecture has no MTP head (bind_mtp is null too).
    void (*mtp_block)(PassState& st, const LayerWeights& l) = nullptr;
    // The layers whose outputs a hidden-state drafter (EAGLE-3, DFlash) reads when its file
    // does not name them (SessionParams::capture_layers). Null: default_capture_layers.
    std::vector<int> (*capture_layers)(const HParams& hp) = nullptr;
    // The layer of the target's KV cache a drafter layer reads (Gemma 4's assistant attends over
    // the target's cache, Session::kv()): the target's last sliding-window layer for a drafter
    // layer with a window (swa), its last full-attention layer otherwise. Null:
    // default_kv_source_layer.
    int (*kv_source_layer)(const HParams& hp, bool swa) = nullptr;

    // The per-row widths (in floats) of the architecture's own pass buffers, PassState::arch
    // (a fused QKV's output, a gated query's gate). Null: none.
    std::vector<int64_t> (*scratch)(const HParams& hp) = nullptr;
};

// EAGLE-3's choice: the outputs of layers 2, n_layer / 2 and n_layer - 3 (clamped to the layers
// there are, ascending, without repeats).
std::vector<int> default_capture_layers(const HParams& hp);
// The last layer of the kind asked (sliding-window or not) with a KV cache of its own (never a
// recurrent one, nor one that reads another's cache); -1 when the model has none.
int default_kv_source_layer(const HParams& hp, bool swa);
// What a drafter asks: the architecture's hook where it has one, else the default above.
std::vector<int> capture_layers_for(const ArchSpec& a, const HParams& hp);
int kv_source_layer_for(const ArchSpec& a, const HParams& hp, bool swa);

extern const ArchSpec kLlamaArch;      // model/arch/llama.cpp (Llama 1-3, Mistral, Mixtral)
extern const ArchSpec kQwen2Arch;      // model/arch/qwen2.cpp
extern const ArchSpec kQwen3Arch;      // model/arch/qwen3.cpp
extern const ArchSpec kQwen3MoeArch;   // model/arch/qwen3.cpp
extern const ArchSpec kGemma2Arch;     // model/arch/gemma.cpp
extern const ArchSpec kGemma3Arch;     // model/arch/gemma.cpp
extern const ArchSpec kGemma4Arch;     // model/arch/gemma4.cpp
extern const ArchSpec kGptOssArch;     // model/arch/gpt_oss.cpp
extern const ArchSpec kPhi3Arch;       // model/arch/phi3.cpp (Phi-3, Phi-4)
extern const ArchSpec kMistral3Arch;   // model/arch/mistral3.cpp (Ministral 3)
extern const ArchSpec kQwen35Arch;     // model/arch/qwen35.cpp (Qwen3.5 / 3.6 hybrid)
extern const ArchSpec kQwen35MoeArch;  // model/arch/qwen35.cpp
extern const ArchSpec kDeepseek2Arch;  // model/arch/deepseek2.cpp (MLA, DeepSeek V3)
extern const ArchSpec kGlm4MoeArch;    // model/arch/glm4moe.cpp (GLM-4.5 / 4.6 / 4.7 MoE)
extern const ArchSpec kNemotronHArch;  // model/arch/nemotron_h.cpp (Mamba-2 hybrid)

// Every supported architecture, in the order the error message lists them.
std::span<const ArchSpec* const> archs();

// The architecture named `name`; throws Error "<path>: unsupported architecture '<name>'
// (supported: ...)".
const ArchSpec& find_arch(std::string_view name, const std::string& path);

// An integer key of the architecture's own (`def` when absent and def >= 0; an Error "missing key"
// when absent and def < 0), checked to lie in [lo, hi]: an Error naming the file, the key and the
// range otherwise (model/load/hparams.cpp, where the shared readers use it too).
int read_int(const GGUFFile& f, const std::string& key, int64_t def, int64_t lo, int64_t hi);

// hp.swa_layers from `<arch>.attention.sliding_window_pattern`: one flag per layer, or one value
// for every layer (as ik_llama.cpp reads it); an Error naming the key and the file when it is
// missing or has another count of flags than hp.n_layer (Gemma 4 and its assistant).
void read_swa_flags(const GGUFFile& f, HParams& hp);

// An MTP head's own tensors in its block `pre` ("blk.N."; qwen35, glm4moe, deepseek2; the caller
// binds its layer): nextn.{eh_proj [2 n_embd -> n_embd], enorm, hnorm}, optional
// nextn.shared_head_norm, nextn.shared_head_head (else ik_llama.cpp's output_extra.weight:
// llama-quantize's extra copy of the output matrix, usually smaller, that only the head reads;
// else the model's output) and nextn.embed_tokens (else token_embd).
void bind_nextn_tensors(TensorBinder& b, const HParams& hp, const std::string& pre, MtpWeights& m);

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
void llama_block(PassState& st, const LayerWeights& l);

}  // namespace specula
