// PassState (model/blocks/pass_state.h): what a pass of a model fixes once (rope, attention and
// DeltaNet shapes), and the row helpers every block shares.
#include "model/blocks/pass_state.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "model/load/model.h"

namespace specula {

PassState::PassState(const Model& m) : model(m), hp(m.hparams()) {
    rope.n_rot = hp.n_rot;
    rope.neox = hp.rope_neox;
    rope.freq_base = hp.rope_freq_base;
    rope.freq_scale = hp.rope_freq_scale;
    if (hp.rope_yarn) {
        rope.ext_factor = 1.0f;
        rope_yarn_corr_dims(hp.n_rot, hp.n_ctx_orig, hp.rope_freq_base, hp.rope_yarn_beta_fast,
                            hp.rope_yarn_beta_slow, rope.corr_dims);
    }
    rope.attn_factor = hp.rope_attn_factor;
    rope_swa = rope;
    rope_swa.n_rot = hp.n_rot_swa > 0 ? hp.n_rot_swa : hp.n_rot;
    rope_swa.freq_base = hp.rope_freq_base_swa;
    rope_swa.freq_scale = hp.rope_freq_scale_swa;
    if (hp.rope_yarn) {
        rope_yarn_corr_dims(rope_swa.n_rot, hp.n_ctx_orig, hp.rope_freq_base_swa,
                            hp.rope_yarn_beta_fast, hp.rope_yarn_beta_slow, rope_swa.corr_dims);
    }
    // Sliding-window layers need their own angles only when they rotate differently (gemma3);
    // phi3's window layers, and gpt-oss's, share the global ones.
    swa_rope = hp.any_swa() && (hp.rope_freq_base_swa != hp.rope_freq_base ||
                                hp.rope_freq_scale_swa != hp.rope_freq_scale ||
                                rope_swa.n_rot != rope.n_rot || !hp.swa_rope_factors);
    att_shape = {
        hp.n_head, hp.n_head_kv, hp.head_dim,
        hp.attn_scale > 0 ? hp.attn_scale : 1.0f / std::sqrt(static_cast<float>(hp.head_dim))};
    att_shape.softcap = hp.attn_softcap;
    // Sized for the widest layer (the attention's scratch follows the head size).
    att_shape.head_dim = std::max(att_shape.head_dim, hp.max_head_dim());
    if (hp.n_recurrent() > 0) dn_shape = delta_net_shape(hp);
}

AttentionShape PassState::layer_shape(int layer) const {
    AttentionShape s = att_shape;
    s.n_head = hp.layer_n_head(layer);
    s.n_head_kv = hp.layer_n_head_kv(layer);
    s.head_dim = hp.layer_head_dim(layer);
    s.scale = hp.attn_scale > 0 ? hp.attn_scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    s.window = hp.window(layer);
    return s;
}

void norm_rows(PassState& st, const float* in, const float* w, int ntok, float* out) {
    const HParams& hp = st.hp;
    over_items(*st.pool, ntok, hp.n_embd, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const size_t o = static_cast<size_t>(t) * hp.n_embd;
            rms_norm(in + o, w, hp.n_embd, hp.rms_eps, out + o);
        }
    });
}

void add_bias(float* y, const float* b, int ntok, int64_t width, int64_t ld) {
    if (!b) return;
    for (int t = 0; t < ntok; ++t) add_into(y + t * ld, b, width);
}

// In pieces of 16 elements.
void silu_mul_all(ThreadPool& pool, float* g, const float* u, int64_t n) {
    over_items(pool, (n + 15) / 16, 16, [&](int64_t b, int64_t e) {
        silu_mul(g + 16 * b, u + 16 * b, std::min(n, 16 * e) - 16 * b);
    });
}

void gelu_mul_all(ThreadPool& pool, float* g, const float* u, int64_t n) {
    over_items(pool, (n + 15) / 16, 16, [&](int64_t b, int64_t e) {
        gelu_mul(g + 16 * b, u + 16 * b, std::min(n, 16 * e) - 16 * b);
    });
}

void add_into_all(ThreadPool& pool, float* y, const float* x, int64_t n) {
    over_items(pool, (n + 15) / 16, 16, [&](int64_t b, int64_t e) {
        add_into(y + 16 * b, x + 16 * b, std::min(n, 16 * e) - 16 * b);
    });
}

}  // namespace specula
