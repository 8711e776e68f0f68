// A model file's own consistency, checked by Model::load once the architecture has read its
// hyperparameters and before any weight is bound, so that a file that contradicts itself is
// refused instead of loading with a layer dropped or a rotation broken. Each refusal is an Error
// naming the file and the key or tensor at fault:
//
//  - layers: every `blk.N.` tensor has N < {arch}.block_count, and every layer below it has
//    tensors (a block_count too small would drop the last layers silently; too large, leave a
//    layer empty);
//  - MTP (nextn) layers: the layers holding `blk.N.nextn.*` tensors are exactly the last
//    {arch}.nextn_predict_layers ones (0 or absent: none), so a wrong count can neither make an
//    MTP layer a main one nor drop a main layer into the MTP head;
//  - rope: every number under {arch}.rope.* is finite; rope.freq_base(_swa), the scaling's
//    attn_factor and yarn betas are > 0, and so is rope.scaling.factor (or rope.scale_linear)
//    when rope.scaling.type asks for scaling (linear or yarn; 0 with no type means none, as
//    llama.cpp reads it); every value of the rope-factor tensors (rope_freqs, LongRoPE's
//    rope_factors_long / _short) is finite and > 0.
//
// With `check_values` (the --check-tensors flag, llama.cpp's), every tensor of a supported type
// is dequantized (block scales and all) on `n_threads` threads and the first NaN or infinity is
// refused, naming the tensor, its type, row and column. Tensors of types the engine cannot
// dequantize are not scanned (they are refused when a weight uses them).
#pragma once

#include "gguf/gguf.h"
#include "model/load/hparams.h"

namespace specula {

struct FileCheckOptions {
    bool check_values = false;  // --check-tensors
    int n_threads = 0;          // 0: the hardware threads
};

// Throws Error naming the file and the key or tensor.
void check_model_file(const GGUFFile& f, const HParams& hp, const FileCheckOptions& opts);

// The --check-tensors scan alone; returns the bytes of tensor data scanned.
uint64_t check_tensor_values(const GGUFFile& f, int n_threads);

}  // namespace specula
