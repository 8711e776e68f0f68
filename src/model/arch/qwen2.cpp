// Architecture "qwen2": llama's keys, tensors and block, with required Q/K/V biases and NEOX
// rope.
//   hparams: qwen2.{context_length, embedding_length, block_count, feed_forward_length,
//            attention.head_count, attention.head_count_kv, attention.key_length,
//            attention.value_length, attention.layer_norm_rms_epsilon, rope.dimension_count,
//            rope.freq_base, rope.scaling.*}; no experts (qwen2moe is another architecture)
//   tensors: as llama, with blk.N.attn_{q,k,v}.bias required
//   block:   llama_block (model/load/arch.h); the rope rotates the two halves of each head (NEOX).
#include "common/error.h"
#include "model/load/arch.h"

namespace specula {

namespace {

void read_keys(const GGUFFile& f, HParams& hp) {
    read_llama_hparams(f, hp);
    if (hp.n_expert > 0) {
        fail(f.path(), ": mixture of experts is supported for the llama architecture only");
    }
    hp.rope_neox = true;
}

void bind_tensors(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_llama_tensors(b, hp, Need::Required, w);
}

}  // namespace

const ArchSpec kQwen2Arch = {"qwen2", read_keys, bind_tensors, llama_block, /*device_block=*/true};

}  // namespace specula
