// The Gated DeltaNet block (model/blocks/blocks.h; qwen35's linear attention) over the pass's
// segments, each against its own session's recurrent state (model/state/recurrent_state.h),
// following ik_llama.cpp's graph: the input projections for every row of the pass at once, the
// recurrence per segment (model/state/delta_net.h), then the gated RMSNorm and ssm_out.
#include <cstring>

#include "kernels/ops.h"
#include "model/blocks/blocks.h"

namespace specula {

void delta_net(PassState& st, const LayerWeights& l) {
    ThreadPool& pool = *st.pool;
    const DeltaNetShape& sh = st.dn_shape;
    const int ntok = st.n_rows;
    const int64_t C = sh.conv_dim, V = sh.value_dim(), nv = sh.n_v_heads, d = st.hp.n_embd;
    norm_rows(st, st.x.data(), l.attn_norm, ntok, st.h.data());
    const MatmulJob in[] = {{l.ssm_qkv, st.dn_x.data(), C},
                            {l.ssm_gate, st.dn_z.data(), V},
                            {l.ssm_beta, st.dn_b.data(), nv},
                            {l.ssm_alpha, st.dn_a.data(), nv}};
    matmul_multi(in, st.h.data(), d, ntok, pool, st.mm);
    delta_net_gate(st.dn_a.data(), l.ssm_dt, l.ssm_a, ntok, int(nv), st.dn_g.data());
    for (size_t s = 0; s < st.segs.size(); ++s) {
        const RecurrentState::LayerIO io = st.segs[s].seq->rec.layer(st.il);
        const int n = st.n[s];
        const float* x = st.dn_x.data() + st.off[s] * C;
        const float* g = st.dn_g.data() + st.off[s] * nv;
        const float* b = st.dn_b.data() + st.off[s] * nv;
        if (io.keep_x) {  // the inputs a rollback inside this pass replays
            std::memcpy(io.keep_x, x, sizeof(float) * n * C);
            std::memcpy(io.keep_g, g, sizeof(float) * n * nv);
            std::memcpy(io.keep_beta, b, sizeof(float) * n * nv);
        }
        delta_net_run(sh, l.ssm_conv1d, io.conv_in, io.conv_out, io.ssm_in, io.ssm_out, x, g, b, n,
                      st.dn_o.data() + st.off[s] * V, st.dn_scratch.data(), pool);
    }
    // z = silu(z) * rms_norm(o) * ssm_norm, per value head.
    const int hd = sh.head_dim;
    for (int64_t i = 0; i < int64_t(ntok) * nv; ++i) {
        float* o = st.dn_o.data() + i * hd;
        rms_norm(o, l.ssm_norm, hd, st.hp.rms_eps, o);
        silu_mul(st.dn_z.data() + i * hd, o, hd);
    }
    if (st.last) {  // only each segment's output rows go on, moved to the front (as attention)
        for (size_t s = 0; s < st.segs.size(); ++s) {
            const int src = st.off[s] + st.n[s] - st.n_out[s], dst = st.out_off[s];
            if (st.n_out[s] == 0 || src == dst) continue;
            std::memmove(st.dn_z.data() + dst * V, st.dn_z.data() + src * V,
                         sizeof(float) * st.n_out[s] * V);
            std::memmove(st.x.data() + size_t(dst) * d, st.x.data() + size_t(src) * d,
                         sizeof(float) * st.n_out[s] * d);
        }
    }
    matmul(l.ssm_out, st.dn_z.data(), V, st.rows, st.tmp.data(), d, pool, st.mm);
    for (int64_t i = 0; i < int64_t(st.rows) * d; ++i) st.x[size_t(i)] += st.tmp[size_t(i)];
}

}  // namespace specula
