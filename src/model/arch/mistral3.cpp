// Architecture "mistral3": Ministral 3 (ik_llama.cpp's build_mistral3). Llama's keys, tensors and
// block (normal rope on adjacent pairs, optional MoE), plus YaRN rope scaling and the attention
// temperature: after the rope, q of the token at position p is multiplied by
//   1 + temperature_scale * log(floor((p + 1) / original_context_length) + 1)
// (1 for every position before the training context's end).
// A file of its own rather than llama's: the keys below are read for mistral3 only, and the
// temperature is a block step llama does not have.
//   hparams: llama's keys under mistral3.*, plus attention.temperature_scale (default 0.1, as
//            ik_llama.cpp's hparams default it), rope.scaling.type yarn with
//            rope.scaling.{factor, original_context_length, yarn_beta_fast, yarn_beta_slow,
//            yarn_log_multiplier} (the log multiplier sets the rope magnitude
//            mscale(factor, 1) / mscale(factor, log_mul), mscale(s, m) = 0.1 m ln s + 1 for
//            s > 1). rope.dimension_count must equal the head size.
//   tensors: as llama (model/load/arch.h: bind_llama_tensors), Q/K/V biases optional.
//   block:   llama_block with the temperature between the rope and the attention.
#include <cmath>

#include "common/error.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"

namespace specula {

namespace {

float yarn_mscale(float scale, float mscale) {
    return scale <= 1.0f ? 1.0f : 0.1f * mscale * std::log(scale) + 1.0f;
}

float get_float(const GGUFFile& f, const std::string& key, float def) {
    const double v = f.get_float_or(key, def);
    if (!std::isfinite(v)) fail(f.path(), ": key '", key, "' = ", v, " is not finite");
    return static_cast<float>(v);
}

void read_keys(const GGUFFile& f, HParams& hp) {
    read_base_hparams(f, hp);
    read_attention_hparams(f, hp);
    read_rope_hparams(f, hp);
    read_expert_hparams(f, hp);
    hp.rope_neox = false;
    const std::string p = hp.arch + ".";
    if (hp.n_rot != hp.head_dim) {
        fail(f.path(), ": key '", p, "rope.dimension_count' = ", hp.n_rot,
             " must equal the head size ", hp.head_dim, " for mistral3");
    }
    hp.attn_temp_scale = get_float(f, p + "attention.temperature_scale", 0.1f);
    hp.attn_temp_floor = hp.n_ctx_orig;
    hp.rope_yarn_beta_fast = get_float(f, p + "rope.scaling.yarn_beta_fast", 32.0f);
    hp.rope_yarn_beta_slow = get_float(f, p + "rope.scaling.yarn_beta_slow", 1.0f);
    const float log_mul = get_float(f, p + "rope.scaling.yarn_log_multiplier", 0.0f);
    if (log_mul != 0.0f) {
        const float factor = 1.0f / hp.rope_freq_scale;
        hp.rope_attn_factor *= yarn_mscale(factor, 1.0f) / yarn_mscale(factor, log_mul);
    }
}

void bind_tensors(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_llama_tensors(b, hp, Need::Optional, w);
}

// The attention temperature: q of a row at position p *= 1 + attn_temp_scale *
// log(floor((p + 1) / attn_temp_floor) + 1), after the rope (ik_llama.cpp computes each row's
// factor in float, as here).
void temper_q(PassState& st) {
    const HParams& hp = st.hp;
    const int64_t dq = hp.n_embd_q();
    const float floor_scale = static_cast<float>(hp.attn_temp_floor);
    for (size_t s = 0; s < st.segs.size(); ++s) {
        for (int t = 0; t < st.n[s]; ++t) {
            const float pos = static_cast<float>(st.pos(s, t));
            const float f =
                std::log(std::floor((pos + 1.0f) / floor_scale) + 1.0f) * hp.attn_temp_scale + 1.0f;
            float* q = st.q.data() + (st.off[s] + t) * dq;
            for (int64_t i = 0; i < dq; ++i) q[i] *= f;
        }
    }
}

void block(PassState& st, const LayerWeights& l) {
    attention_input(st, l);
    rope_and_cache(st);
    if (st.hp.attn_temp_scale != 0.0f) temper_q(st);
    attention_output(st, l);
    ffn(st, l);
}

}  // namespace

// The Vulkan backend has no temperature step: mistral3 layers run on the CPU.
const ArchSpec kMistral3Arch = {"mistral3", read_keys, bind_tensors, block,
                                /*device_block=*/false};

}  // namespace specula
