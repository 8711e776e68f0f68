// What `specula quantize TYPE` means: llama-quantize's file types (LLAMA_FTYPE_*: a base tensor
// type plus, for the K-quant mixes, rules that give some tensors more bits) and the choice of one
// tensor's type under them. The rules are llama.cpp's (src/llama-quant.cpp, llama_tensor_get_type)
// for the types below, restated: a file quantized here has the tensor types llama-quantize gives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_types.h"

namespace specula::quant {

// One row of the file-type table.
struct FileType {
    std::string_view name;  // as llama-quantize spells it: "Q4_K_M"
    uint32_t ftype;         // general.file_type (llama.cpp's LLAMA_FTYPE_MOSTLY_*)
    GGMLType base;          // the type of most quantized tensors
};

// Every file type `specula quantize` writes, in the usage text's order.
const std::vector<FileType>& file_types();

// The row named `name` (any case) or numbered `name` (llama-quantize takes "15" for Q4_K_M);
// nullopt when none.
std::optional<FileType> find_file_type(std::string_view name);

// The model facts the rules read (from the file's metadata and tensor names).
struct MixModel {
    std::string arch;         // general.architecture
    int n_layer = 0;          // <arch>.block_count
    int n_gqa = 1;            // head_count / head_count_kv
    int n_expert = 0;         // <arch>.expert_count
    bool has_output = false;  // an output.weight tensor (else token_embd is also the output)
    int n_attention_wv = 0;   // tensors named *attn_v.weight / attn_qkv / attn_kv_b
};

// The running state of the rules over one file: llama-quantize counts attn_v and ffn_down tensors
// in the order it visits them (quantize/quantize_file.h's tensor order), and a layer's extra bits
// depend on that count, not on the layer number (except for MoE models).
struct MixState {
    int i_attention_wv = 0;
    int i_ffn_down = 0;
};

struct MixOptions {
    bool pure = false;                        // --pure: every quantized tensor gets the base type
    std::optional<GGMLType> output_type;      // --output-tensor-type
    std::optional<GGMLType> token_embd_type;  // --token-embedding-type
    bool leave_output = false;                // --leave-output-tensor
};

// Whether llama-quantize quantizes a tensor at all: a 2-D or 3-D ".weight" that is not a norm,
// an MoE router, a position/type embedding or a few small special tensors.
bool is_quantizable(const std::string& name, int n_dims, const MixOptions& opt);

// The type a quantizable tensor gets (ne0: its row length). Advances `st`. Falls back, as
// llama-quantize, to a type whose block divides the row (Q4_K -> Q5_0, Q5_K -> Q5_1,
// Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, then F16) and counts that in *n_fallback.
GGMLType tensor_type(const FileType& ft, const MixModel& m, MixState& st, const std::string& name,
                     int64_t ne0, const MixOptions& opt, int* n_fallback);

}  // namespace specula::quant
