// ForwardPass::delta_net: a Gated DeltaNet layer (qwen35's linear attention) over the pass's
// segments, each against its own session's recurrent state (model/recurrent_state.h), following
// ik_llama.cpp's graph: the input projections for every row of the pass at once, the recurrence
// per segment (model/delta_net.h), then the gated RMSNorm and ssm_out.
#include <cstring>

#include "model/forward_pass.h"
#include "model/ops.h"

namespace specula {

void ForwardPass::delta_net(const LayerWeights& l) {
    ThreadPool& pool = *pool_;
    const DeltaNetShape& sh = dn_shape_;
    const int ntok = n_rows_;
    const int64_t C = sh.conv_dim, V = sh.value_dim(), nv = sh.n_v_heads, d = hp_.n_embd;
    norm_rows(x_.data(), l.attn_norm, ntok, h_.data());
    const MatmulJob in[] = {{l.ssm_qkv, dn_x_.data(), C},
                            {l.ssm_gate, dn_z_.data(), V},
                            {l.ssm_beta, dn_b_.data(), nv},
                            {l.ssm_alpha, dn_a_.data(), nv}};
    matmul_multi(in, h_.data(), d, ntok, pool, mm_);
    delta_net_gate(dn_a_.data(), l.ssm_dt, l.ssm_a, ntok, int(nv), dn_g_.data());
    for (size_t s = 0; s < segs_.size(); ++s) {
        const RecurrentState::LayerIO io = segs_[s].seq->rec.layer(il_);
        const int n = n_[s];
        const float* x = dn_x_.data() + off_[s] * C;
        const float* g = dn_g_.data() + off_[s] * nv;
        const float* b = dn_b_.data() + off_[s] * nv;
        if (io.keep_x) {  // the inputs a rollback inside this pass replays
            std::memcpy(io.keep_x, x, sizeof(float) * n * C);
            std::memcpy(io.keep_g, g, sizeof(float) * n * nv);
            std::memcpy(io.keep_beta, b, sizeof(float) * n * nv);
        }
        delta_net_run(sh, l.ssm_conv1d, io.conv_in, io.conv_out, io.ssm_in, io.ssm_out, x, g, b, n,
                      dn_o_.data() + off_[s] * V, dn_scratch_.data(), pool);
    }
    // z = silu(z) * rms_norm(o) * ssm_norm, per value head.
    const int hd = sh.head_dim;
    for (int64_t i = 0; i < int64_t(ntok) * nv; ++i) {
        float* o = dn_o_.data() + i * hd;
        rms_norm(o, l.ssm_norm, hd, hp_.rms_eps, o);
        silu_mul(dn_z_.data() + i * hd, o, hd);
    }
    if (last_) {  // only each segment's output rows go on, moved to the front (as attention)
        for (size_t s = 0; s < segs_.size(); ++s) {
            const int src = off_[s] + n_[s] - n_out_[s], dst = out_off_[s];
            if (n_out_[s] == 0 || src == dst) continue;
            std::memmove(dn_z_.data() + dst * V, dn_z_.data() + src * V,
                         sizeof(float) * n_out_[s] * V);
            std::memmove(x_.data() + size_t(dst) * d, x_.data() + size_t(src) * d,
                         sizeof(float) * n_out_[s] * d);
        }
    }
    matmul(l.ssm_out, dn_z_.data(), V, rows_, tmp_.data(), d, pool, mm_);
    for (int64_t i = 0; i < int64_t(rows_) * d; ++i) x_[size_t(i)] += tmp_[size_t(i)];
}

}  // namespace specula
