// The feed-forward block (model/blocks/blocks.h): dense SwiGLU / GeGLU, or the mixture of experts
// (model/blocks/moe.h) with its optional shared expert.
#include <cmath>

#include "kernels/ops.h"
#include "model/blocks/blocks.h"

namespace specula {

namespace {

// tmp += down(silu(gate h) * up h) * sigmoid(gate_inp_shexp . h), h the normed rows in st.h; an
// ungated shared expert (no ffn_gate_inp_shexp: glm4moe) adds its output as it is.
void shared_expert(PassState& st, const LayerWeights& l, int nrows) {
    ThreadPool& pool = *st.pool;
    const int64_t nff = st.hp.n_ff_shexp, d = st.hp.n_embd;
    const MatmulJob gate_up[] = {{l.ffn_gate_shexp, st.sh_g.data(), nff},
                                 {l.ffn_up_shexp, st.sh_u.data(), nff}};
    matmul_multi(gate_up, st.h.data(), d, nrows, pool, st.mm);
    silu_mul_all(pool, st.sh_g.data(), st.sh_u.data(), int64_t(nrows) * nff);
    matmul(l.ffn_down_shexp, st.sh_g.data(), nff, nrows, st.sh_d.data(), d, pool, st.mm);
    if (!l.ffn_gate_inp_shexp) {
        add_into_all(pool, st.tmp.data(), st.sh_d.data(), int64_t(nrows) * d);
        return;
    }
    for (int t = 0; t < nrows; ++t) {
        const float* h = st.h.data() + t * d;
        float dot = 0.0f;
        for (int64_t i = 0; i < d; ++i) dot += l.ffn_gate_inp_shexp[i] * h[i];
        const float s = 1.0f / (1.0f + std::exp(-dot));
        float* y = st.tmp.data() + t * d;
        const float* sd = st.sh_d.data() + t * d;
        for (int64_t i = 0; i < d; ++i) y[i] += sd[i] * s;
    }
}

}  // namespace

void dense_ffn(PassState& st, const LayerWeights& l, int nrows, float* out) {
    ThreadPool& pool = *st.pool;
    const HParams& hp = st.hp;
    const int64_t nff = hp.layer_n_ff(st.il);
    const MatmulJob gate_up[] = {{l.ffn_gate, st.ff_g.data(), nff},
                                 {l.ffn_up, st.ff_u.data(), nff}};
    matmul_multi(gate_up, st.h.data(), hp.n_embd, nrows, pool, st.mm);
    const int64_t n = static_cast<int64_t>(nrows) * nff;
    if (hp.ffn_act == HParams::FfnAct::GeluTanh)
        gelu_mul_all(pool, st.ff_g.data(), st.ff_u.data(), n);
    else
        silu_mul_all(pool, st.ff_g.data(), st.ff_u.data(), n);
    matmul(l.ffn_down, st.ff_g.data(), nff, nrows, out, hp.n_embd, pool, st.mm);
}

void ffn(PassState& st, const LayerWeights& l) {
    ThreadPool& pool = *st.pool;
    const HParams& hp = st.hp;
    const int nrows = st.rows;
    norm_rows(st, st.x.data(), l.ffn_norm, nrows, st.h.data());
    if (l.ffn_gate_inp) {  // an MoE layer (a model's leading layers may be dense: glm4moe)
        st.moe.forward(l, hp, st.h.data(), nrows, st.tmp.data(), pool, st.mm);
        if (l.ffn_up_shexp.data) shared_expert(st, l, nrows);
    } else {
        dense_ffn(st, l, nrows, st.tmp.data());
    }
    if (l.ffn_post_norm) norm_rows(st, st.tmp.data(), l.ffn_post_norm, nrows, st.tmp.data());
    add_into_all(pool, st.x.data(), st.tmp.data(), static_cast<int64_t>(nrows) * hp.n_embd);
}

}  // namespace specula
