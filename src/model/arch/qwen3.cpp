// Architectures "qwen3" and "qwen3moe": llama's keys and tensors without biases, NEOX rope, and a
// per-head RMSNorm on Q and K before the rope.
//   hparams: qwen3.{context_length, embedding_length, block_count, feed_forward_length,
//            attention.head_count, attention.head_count_kv, attention.key_length (Qwen3's heads
//            are wider than embedding_length / head_count), attention.value_length,
//            attention.layer_norm_rms_epsilon, rope.dimension_count, rope.freq_base,
//            rope.scaling.*}; no experts.
//            qwen3moe: the same keys plus expert_count, expert_used_count (both required, >= 1)
//            and expert_feed_forward_length (each expert's width; default feed_forward_length).
//   tensors: as llama (Q/K/V/output biases optional, as ik_llama.cpp reads them), plus
//            blk.N.attn_q_norm and blk.N.attn_k_norm of head_dim each; qwen3moe has the router
//            ffn_gate_inp and ffn_{gate,up,down}_exps instead of the dense FFN, no shared expert.
//   block:   h = rms_norm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h;
//            q, k = per-head rms_norm * attn_{q,k}_norm; rope (NEOX); x += Wo attention;
//            x += FFN(rms_norm(x) * ffn_norm), the MoE (model/blocks/moe.h: softmax routing, the
//            top-k weights renormalised, as ik_llama.cpp's qwen3moe graph always does) for
//            qwen3moe.
#include "common/error.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"

namespace specula {

namespace {

void read_common(const GGUFFile& f, HParams& hp) {
    read_llama_hparams(f, hp);
    hp.rope_neox = true;
}

void read_dense(const GGUFFile& f, HParams& hp) {
    read_common(f, hp);
    if (hp.n_expert > 0) {
        fail(f.path(), ": key '", hp.arch,
             ".expert_count' is set: a mixture of experts is the qwen3moe architecture");
    }
}

void read_moe(const GGUFFile& f, HParams& hp) {
    read_common(f, hp);
    if (hp.n_expert == 0) fail(f.path(), ": key '", hp.arch, ".expert_count' is missing or 0");
    read_expert_ff_length(f, hp);
    // ik_llama.cpp's qwen3moe graph always renormalises the top-k weights; a file that says
    // otherwise asks for a model we would compute differently.
    const std::string norm_key = hp.arch + ".expert_weights_norm";
    if (!f.get_bool_or(norm_key, true)) {
        fail(f.path(), ": key '", norm_key, "' = false is not supported (qwen3moe renormalises)");
    }
}

void bind_tensors(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_llama_tensors(b, hp, Need::Optional, w);
    for (int il = 0; il < hp.n_layer; ++il) bind_qk_norm(b, hp, layer_prefix(il), w.layers[il]);
}

void block(PassState& st, const LayerWeights& l) {
    attention_input(st, l);
    qk_norm(st, l);
    rope_and_cache(st);
    attention_output(st, l);
    ffn(st, l);
}

}  // namespace

// On Vulkan, qwen3's layers run on the device; qwen3moe's stay on the CPU (no expert shaders:
// the plan says so).
const ArchSpec kQwen3Arch = {"qwen3", read_dense, bind_tensors, block, /*device_block=*/true};
const ArchSpec kQwen3MoeArch = {"qwen3moe", read_moe, bind_tensors, block,
                                /*device_block=*/true};

}  // namespace specula
