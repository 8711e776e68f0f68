// The attention blocks (model/blocks/blocks.h): K and V are computed for every row; in the last
// layer the attention output and the residual only for each segment's output rows, which are first
// moved together to the front of x (segment by segment, in order, so no row is overwritten
// before it moves).
#include <cstring>
#include <span>

#include "kernels/ops.h"
#include "model/blocks/blocks.h"

namespace specula {

void attention_input(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int64_t dq = hp.layer_n_embd_q(st.il), dkv = hp.layer_n_embd_kv(st.il);
    const int ntok = st.n_rows;
    norm_rows(st, st.x.data(), l.attn_norm, ntok, st.h.data());
    const MatmulJob qkv[] = {
        {l.wq, st.q.data(), dq}, {l.wk, st.k.data(), dkv}, {l.wv, st.v.data(), dkv}};
    // A layer that reads another's cache (HParams::kv_src) computes only Q; one without V
    // weights (Gemma 4) only Q and K.
    const size_t jobs = !hp.own_kv(st.il) ? 1 : l.wv.data ? 3 : 2;
    matmul_multi(std::span(qkv, jobs), st.h.data(), hp.n_embd, ntok, *st.pool, st.mm);
    add_bias(st.q.data(), l.bq, ntok, dq, dq);
    add_bias(st.k.data(), l.bk, ntok, dkv, dkv);
    add_bias(st.v.data(), l.bv, ntok, dkv, dkv);
}

void qk_norm(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int il = st.il, hd = hp.layer_head_dim(il), nh = hp.layer_n_head(il);
    const int nkv = hp.own_kv(il) ? hp.layer_n_head_kv(il) : 0;  // no K of its own: Q only
    const float eps = hp.rms_eps;
    float* q = st.q.data();
    float* k = st.k.data();
    over_items(*st.pool, st.n_rows, (nh + nkv) * hd, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            float* qt = q + t * nh * hd;
            float* kt = k + t * nkv * hd;
            for (int h = 0; h < nh; ++h) rms_norm(qt + h * hd, l.q_norm, hd, eps, qt + h * hd);
            for (int h = 0; h < nkv; ++h) rms_norm(kt + h * hd, l.k_norm, hd, eps, kt + h * hd);
        }
    });
}

void rope_and_cache(PassState& st) {
    const HParams& hp = st.hp;
    const int il = st.il, hd = hp.layer_head_dim(il);
    const int64_t dq = hp.layer_n_embd_q(il), dkv = hp.layer_n_embd_kv(il);
    const bool own = st.mtp || hp.own_kv(il);
    float* kc = st.k.data();
    float* vc = st.v.data();
    const bool swa = st.swa_rope && hp.is_swa(il);  // its own angles (gemma3)
    const RopeParams& rp = swa ? st.rope_swa : st.rope;
    const float* angles = swa ? st.rope_cs_swa.data() : st.rope_cs.data();
    const size_t stride = static_cast<size_t>(hp.max_n_rot());
    // Rows [t0, t1) of the pass, each on its own (its rotations, its K/V row written at its own
    // position): split over the pool, each row's bits are the ones it gets on one thread.
    auto rows = [&](int64_t t0, int64_t t1) {
        if (t0 >= t1) return;
        size_t s = 0;
        while (st.off[s] + st.n[s] <= t0) ++s;  // segments are in row order (empty ones skipped)
        for (int t = int(t0); t < int(t1); ++t) {
            while (t >= st.off[s] + st.n[s]) ++s;
            const float* cs = angles + static_cast<size_t>(t) * stride;
            rope_apply(rp, cs, st.q.data() + t * dq, hp.layer_n_head(il), hd);
            if (!own) continue;  // it reads another layer's rows
            rope_apply(rp, cs, kc + t * dkv, hp.layer_n_head_kv(il), hd);
            // Every K/V row enters the cache through write() (the cache decides its storage).
            KVCache& kv = st.kv_of(s);
            kv.write(st.kv_layer(), kv.n_past() + t - st.off[s], kc + t * dkv, vc + t * dkv);
        }
    };
    // A row costs a few operations per value (rotations, the cache's conversions and scattered
    // stores), more than the element-wise ops kParallelElems is set for: counted 4 times.
    over_items(*st.pool, st.n_rows, 4 * (dq + 2 * dkv), rows);
}

AttendedRows attended_rows(const PassState& st, size_t s) {
    const int r0 = st.last ? st.n[s] - st.n_out[s] : 0;  // first row of the segment to finish
    return {st.off[s] + r0, st.last ? st.out_off[s] : st.off[s], st.n[s] - r0};
}

void attend(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int64_t dq = hp.layer_n_embd_q(st.il);
    AttentionShape shape = st.layer_shape(st.il);
    shape.sinks = l.attn_sinks;
    for (size_t s = 0; s < st.segs.size(); ++s) {
        const KVCache& kv = st.kv_of(s);
        const AttendedRows r = attended_rows(st, s);
        if (r.n == 0) continue;
        attention(kv, st.kv_layer(), kv.n_past() + r.src - st.off[s], r.n, st.q.data() + r.src * dq,
                  st.att.data() + r.dst * dq, shape, *st.pool, st.scores.data());
        if (st.last && r.dst != r.src) {
            std::memmove(st.x.data() + static_cast<size_t>(r.dst) * hp.n_embd,
                         st.x.data() + static_cast<size_t>(r.src) * hp.n_embd,
                         sizeof(float) * r.n * hp.n_embd);
        }
    }
}

void attention_project(PassState& st, const LayerWeights& l) {
    const HParams& hp = st.hp;
    const int nr = st.rows;
    matmul(l.wo, st.att.data(), hp.layer_n_embd_q(st.il), nr, st.tmp.data(), hp.n_embd, *st.pool,
           st.mm);
    add_bias(st.tmp.data(), l.bo, nr, hp.n_embd, hp.n_embd);
    if (l.attn_post_norm) norm_rows(st, st.tmp.data(), l.attn_post_norm, nr, st.tmp.data());
    add_into_all(*st.pool, st.x.data(), st.tmp.data(), static_cast<int64_t>(nr) * hp.n_embd);
}

void attention_output(PassState& st, const LayerWeights& l) {
    attend(st, l);
    attention_project(st, l);
}

}  // namespace specula
