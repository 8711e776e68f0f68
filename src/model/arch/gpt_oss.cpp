// Architecture "gpt-oss" (OpenAI's gpt-oss; ik_llama.cpp's LLM_ARCH_OPENAI_MOE).
//   hparams: gpt-oss.{context_length, embedding_length, block_count, feed_forward_length,
//            attention.head_count, attention.head_count_kv, attention.key_length (64: wider
//            heads than embedding_length / head_count), attention.value_length,
//            attention.layer_norm_rms_epsilon, attention.sliding_window (required), rope.*
//            (YaRN: rope.scaling.type yarn, factor, original_context_length), expert_count,
//            expert_used_count, expert_feed_forward_length}.
//   tensors: token_embd, output_norm, output; per layer blk.N.attn_norm, attn_{q,k,v,output}
//            with their biases (all required), attn_sinks [head_count], post_attention_norm (the
//            FFN's norm), the router ffn_gate_inp with its bias, ffn_{gate,up,down}_exps with
//            their biases (the experts are MXFP4 in the released files).
//   block:   h = rms_norm(x) * attn_norm; q, k, v = W h + b; rope (NEOX, YaRN); even layers attend
//            within a sliding window of attention.sliding_window keys, odd layers to every key
//            (ik_llama.cpp's pattern 2); each head's softmax has its sink logit in the
//            denominator; x += Wo attention + bo; x += MoE(rms_norm(x) * post_attention_norm):
//            the top expert_used_count router logits (+ bias), their softmax as weights, each
//            expert's clamped SwiGLU (kernels/ops.h swiglu_oai) with biases.
#include "common/error.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"

namespace specula {

namespace {

void read(const GGUFFile& f, HParams& hp) {
    read_base_hparams(f, hp);
    read_attention_hparams(f, hp);
    read_rope_hparams(f, hp);
    read_expert_hparams(f, hp);
    if (hp.n_expert == 0) fail(f.path(), ": key '", hp.arch, ".expert_count' is missing or 0");
    read_expert_ff_length(f, hp);
    read_sliding_window(f, hp, -1);
    hp.swa_layers.assign(static_cast<size_t>(hp.n_layer), 0);
    for (int il = 0; il < hp.n_layer; il += 2) hp.swa_layers[static_cast<size_t>(il)] = 1;
    hp.rope_freq_base_swa = hp.rope_freq_base;
    hp.rope_freq_scale_swa = hp.rope_freq_scale;
    hp.rope_neox = true;
    hp.moe_routing = HParams::MoeRouting::TopKSoftmax;
    hp.moe_act = HParams::MoeAct::SwigluOai;
}

void bind(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_io(b, hp, w);
    w.layers.resize(hp.n_layer);
    const int64_t d = hp.n_embd, ne = hp.n_expert, ff = hp.n_ff_expert;
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string pre = layer_prefix(il);
        LayerWeights& l = w.layers[il];
        bind_attention(b, hp, pre, Need::Required, l);
        l.bo = b.vector(pre + "attn_output.bias", d);
        l.attn_sinks = b.vector(pre + "attn_sinks.weight", hp.n_head);
        l.ffn_norm = b.vector(pre + "post_attention_norm.weight", d);
        l.ffn_gate_inp = b.floats(pre + "ffn_gate_inp.weight", {d, ne});
        l.ffn_gate_inp_b = b.vector(pre + "ffn_gate_inp.bias", ne);
        l.ffn_gate_exps = b.matrix(pre + "ffn_gate_exps.weight", {d, ff, ne});
        l.ffn_up_exps = b.matrix(pre + "ffn_up_exps.weight", {d, ff, ne});
        l.ffn_down_exps = b.matrix(pre + "ffn_down_exps.weight", {ff, d, ne});
        l.ffn_gate_exps_b = b.floats(pre + "ffn_gate_exps.bias", {ff, ne});
        l.ffn_up_exps_b = b.floats(pre + "ffn_up_exps.bias", {ff, ne});
        l.ffn_down_exps_b = b.floats(pre + "ffn_down_exps.bias", {d, ne});
    }
}

}  // namespace

// The Vulkan backend has no sinks, window or MoE shaders yet: gpt-oss layers run on the CPU.
const ArchSpec kGptOssArch = {"gpt-oss", read, bind, llama_block, /*device_block=*/false};

}  // namespace specula
