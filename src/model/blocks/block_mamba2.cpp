// The Mamba-2 block (model/blocks/blocks.h; nemotron_h's SSM layers) over the pass's segments,
// each against its own session's recurrent state (model/state/recurrent_state.h), following
// llama.cpp's build_mamba2_layer: the input projection for every row of the pass at once, the
// conv and the scan per segment (model/state/mamba2.h), then the gate, the grouped RMSNorm and
// ssm_out.
#include <cstring>

#include "kernels/ops.h"
#include "model/blocks/blocks.h"
#include "model/state/mamba2.h"

namespace specula {

namespace {

// proj's rows [z | xBC | dt] apart: z into dn_z, xBC into dn_x, dt + its bias into dn_g.
void split_projection(PassState& st, const LayerWeights& l, const Mamba2Shape& sh,
                      const float* proj) {
    const int64_t di = sh.d_inner, C = sh.conv_dim(), nh = sh.n_head, P = di + C + nh;
    for (int t = 0; t < st.n_rows; ++t) {
        const float* r = proj + t * P;
        std::memcpy(st.dn_z.data() + t * di, r, sizeof(float) * di);
        std::memcpy(st.dn_x.data() + t * C, r + di, sizeof(float) * C);
        float* dt = st.dn_g.data() + t * nh;
        for (int64_t h = 0; h < nh; ++h) dt[h] = r[di + C + h] + l.ssm_dt[h];
    }
}

// z = rms_norm(silu(z) * y) * ssm_norm, per group of d_inner / n_group values of each row.
void gate_and_norm(PassState& st, const LayerWeights& l, const Mamba2Shape& sh) {
    const int64_t di = sh.d_inner, gs = di / sh.n_group;
    over_items(*st.pool, st.n_rows, di, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            float* z = st.dn_z.data() + t * di;
            silu_mul(z, st.dn_o.data() + t * di, di);
            for (int g = 0; g < sh.n_group; ++g)
                rms_norm(z + g * gs, l.ssm_norm + g * gs, int(gs), st.hp.rms_eps, z + g * gs);
        }
    });
}

}  // namespace

void mamba2(PassState& st, const LayerWeights& l, float* proj) {
    ThreadPool& pool = *st.pool;
    const Mamba2Shape sh = mamba2_shape(st.hp);
    const int ntok = st.n_rows;
    const int64_t di = sh.d_inner, C = sh.conv_dim(), nh = sh.n_head, d = st.hp.n_embd;
    norm_rows(st, st.x.data(), l.attn_norm, ntok, st.h.data());
    matmul(l.ssm_in, st.h.data(), d, ntok, proj, di + C + nh, pool, st.mm);
    split_projection(st, l, sh, proj);
    const Mamba2Weights w{l.ssm_conv1d, l.ssm_conv1d_b, l.ssm_a, l.ssm_d};
    for (size_t s = 0; s < st.segs.size(); ++s) {
        const RecurrentState::LayerIO io = st.segs[s].seq->rec.layer(st.il);
        const int n = st.n[s];
        const float* x = st.dn_x.data() + st.off[s] * C;
        const float* dt = st.dn_g.data() + st.off[s] * nh;
        if (io.keep_x) {  // the inputs a rollback inside this pass replays
            std::memcpy(io.keep_x, x, sizeof(float) * n * C);
            std::memcpy(io.keep_g, dt, sizeof(float) * n * nh);
        }
        mamba2_run(sh, w, io.conv_in, io.conv_out, io.ssm_in, io.ssm_out, x, dt, n,
                   st.dn_o.data() + st.off[s] * di, st.dn_scratch.data(), pool);
    }
    gate_and_norm(st, l, sh);
    if (st.last) {  // only each segment's output rows go on, moved to the front (as attention)
        for (size_t s = 0; s < st.segs.size(); ++s) {
            const int src = st.off[s] + st.n[s] - st.n_out[s], dst = st.out_off[s];
            if (st.n_out[s] == 0 || src == dst) continue;
            std::memmove(st.dn_z.data() + dst * di, st.dn_z.data() + src * di,
                         sizeof(float) * st.n_out[s] * di);
            std::memmove(st.x.data() + size_t(dst) * d, st.x.data() + size_t(src) * d,
                         sizeof(float) * st.n_out[s] * d);
        }
    }
    matmul(l.ssm_out, st.dn_z.data(), di, st.rows, st.tmp.data(), d, pool, st.mm);
    add_into_all(pool, st.x.data(), st.tmp.data(), int64_t(st.rows) * d);
}

}  // namespace specula
