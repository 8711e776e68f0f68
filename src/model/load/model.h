// A loaded model: the GGUF file mapped, its tokenizer, its hyperparameters and its weights bound
// by the file's architecture (model/load/arch.h: one file per architecture under model/arch/).
// Sessions evaluate it (model/session.h).
//
// Promises:
//  - Model::load validates every tensor it uses (presence, shape, supported type) and throws
//    specula::Error naming the file and tensor/key at fault; it never reads outside the file.
//    An unsupported architecture names itself and the supported ones.
//  - After load a Model does not change: many sessions on many threads may share one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/env.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"
#include "model/load/hparams.h"
#include "model/load/offload.h"
#include "model/load/pack_cache.h"
#include "model/load/weights.h"
#include "tokenizer/tokenizer.h"

namespace specula {

struct ArchSpec;

// How a model is loaded. The defaults come from the environment (common/env.h,
// model/load/offload.h's env_placement); the CLI passes its -t / -ngl values.
struct LoadOptions {
    int n_threads = 0;                    // repacking threads (0: the hardware threads)
    bool repack = env_settings().repack;  // pack_weights at load (SPECULA_REPACK=0: no)
    // Where Sessions of the model run their layers unless SessionParams says otherwise. n_ctx
    // is unused (each session gives its own).
    OffloadParams gpu = env_placement().target;
    // An MTP-only GGUF ("sidecar", as ik_llama.cpp's -md companions): the same architecture and
    // hyperparameters, block_count and nextn_predict_layers placing its blk.N.nextn.* head after
    // the target's main layers, and only that block's tensors (optionally nextn.embed_tokens and
    // nextn.shared_head_*; the target's token_embd, output and output_norm stand in for them).
    // Its head replaces the file's own (or gives one to a file without). Refused, naming the key
    // and both files: another architecture, hidden size, vocabulary or layer index; a file
    // without nextn layers or nextn tensors.
    std::string mtp_sidecar;
    // --check-tensors: every tensor's values scanned for NaN / infinity at load
    // (model/load/file_checks.h; the file's own consistency is always checked).
    bool check_tensors = false;
    // --repack-cache: a directory keeping the packed weights in a file per model
    // (model/load/pack_cache.h): a later load maps it instead of repacking. Empty: none.
    std::string repack_cache;
};

class Model : public ModelWeights {
  public:
    // Loads a GGUF file. Throws Error for unsupported architectures (naming the supported ones),
    // missing or misshapen tensors, and bad metadata.
    static std::unique_ptr<Model> load(const std::string& path,
                                       const LoadOptions& opts = LoadOptions{});

    const HParams& hparams() const { return hp_; }
    const ArchSpec& arch() const { return *arch_; }
    const Tokenizer& tokenizer() const { return *tok_; }
    const GGUFFile& file() const { return *file_; }
    // Where Sessions run their layers by default (LoadOptions::gpu).
    const OffloadParams& placement() const { return placement_; }
    int64_t n_params() const;
    // Weight bytes one decode step streams: every layer matrix and the output matrix (only the
    // n_expert_used experts' share of MoE expert matrices; the embedding table is only indexed).
    // bytes / (seconds per token) is the weight bandwidth a decode step achieves.
    int64_t bytes_per_token() const;
    std::string describe() const;  // one line: arch, size, file type
    // The MTP sidecar the head came from (LoadOptions::mtp_sidecar), else null.
    const GGUFFile* mtp_file() const { return mtp_file_.get(); }
    // The file the MTP head came from: the sidecar, else the model's own.
    const std::string& mtp_path() const { return mtp_file_ ? mtp_file_->path() : file_->path(); }

    // The weights (ModelWeights: public to the forward pass) and their repacked copies.
    std::vector<PackedBuffer> packed;  // repacked matrices (pack_weights), W.packed points in
    std::unique_ptr<PackCacheMap> packed_file;  // or the --repack-cache file they were mapped from

  private:
    void attach_mtp_sidecar(const std::string& path);  // model/load/mtp_sidecar.cpp

    HParams hp_;
    const ArchSpec* arch_ = nullptr;
    OffloadParams placement_;
    std::unique_ptr<GGUFFile> file_;
    std::unique_ptr<GGUFFile> mtp_file_;  // the MTP sidecar, kept mapped
    std::unique_ptr<Tokenizer> tok_;
};

// Repacks the dense matrices of repackable types (kernels/repack.h: Q8_0, Q4_K, Q6_K; F16 and
// BF16 unless SPECULA_REPACK_FLOAT=0) into the tiled layout the multi-token kernels want, and
// releases the mapped pages of their originals, so resident memory stays that of the file. The
// token embedding keeps its row layout (get_rows reads it); a tied output matrix gets a packed
// copy. MoE expert matrices keep the row layout. Model::load calls it when LoadOptions::repack.
// It runs on n_threads threads (0: the hardware threads). With a cache directory it maps the packed
// matrices from their cache file, or writes that file after packing (model/load/pack_cache.h).
void pack_weights(Model& m, int n_threads = 0, const std::string& cache_dir = {});

// A drafter head's own dense matrices (EAGLE-3, DFlash) packed the same way, on this thread, into
// buffers appended to `packed`: those of a repackable type whose width is whole 256-column blocks,
// not the target's own output matrix (packed with the target), none under SPECULA_REPACK=0.
void pack_head_weights(std::span<WeightView* const> ws, const Model& target,
                       std::vector<PackedBuffer>& packed);

}  // namespace specula
