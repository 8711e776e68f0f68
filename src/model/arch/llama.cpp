// Architecture "llama": Llama 1-3, Mistral, and Mixtral-style mixture of experts.
//   hparams: llama.{context_length, embedding_length, block_count, feed_forward_length,
//            attention.head_count, attention.head_count_kv, attention.key_length,
//            attention.value_length, attention.layer_norm_rms_epsilon, rope.dimension_count,
//            rope.freq_base, rope.scaling.*, expert_count, expert_used_count}
//   tensors: token_embd, output_norm, output (optional: tied to token_embd), rope_freqs
//            (optional, Llama 3); per layer blk.N.attn_norm, attn_{q,k,v,output} (biases
//            optional), ffn_norm, and ffn_{gate,up,down} or, with experts, ffn_gate_inp and
//            ffn_{gate,up,down}_exps
//   block:   pre-norm attention with normal (GPT-J style) rope on adjacent pairs, then a SwiGLU
//            FFN or the MoE (llama_block below).
#include "model/blocks/blocks.h"
#include "model/load/arch.h"

namespace specula {

void read_llama_hparams(const GGUFFile& f, HParams& hp) {
    read_base_hparams(f, hp);
    read_attention_hparams(f, hp);
    read_rope_hparams(f, hp);
    read_expert_hparams(f, hp);
    hp.rope_neox = false;
}

void bind_llama_tensors(TensorBinder& b, const HParams& hp, Need qkv_bias, ModelWeights& w) {
    bind_io(b, hp, w);
    w.layers.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        bind_attention(b, hp, layer_prefix(il), qkv_bias, w.layers[il]);
        bind_ffn(b, hp, layer_prefix(il), w.layers[il]);
    }
}

namespace {

void bind_tensors(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_llama_tensors(b, hp, Need::Optional, w);
}

}  // namespace

void llama_block(PassState& st, const LayerWeights& l) {
    attention_input(st, l);
    rope_and_cache(st);
    attention_output(st, l);
    ffn(st, l);
}

const ArchSpec kLlamaArch = {"llama", read_llama_hparams, bind_tensors, llama_block,
                             /*device_block=*/true};

}  // namespace specula
