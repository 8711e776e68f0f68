// The DFlash drafter's forward pass (dflash_head.h): the context rows (the target's features
// through dflash_fc into every layer's keys and values) and the block pass, built from the model's
// kernels (matmul, rms_norm, rope, the cached attention) row by row as model/blocks does it, so a
// row's result does not depend on how many rows share the pass.
#include <cstring>

#include "common/error.h"
#include "kernels/ops.h"
#include "kernels/quants.h"
#include "model/blocks/pass_state.h"
#include "speculative/drafters/dflash_head.h"

namespace specula {

DFlashState::DFlashState(const DFlashHead& head, int n_ctx, KVType type_k, KVType type_v)
    : kv(head.hp.n_layer, n_ctx, head.hp.n_embd_kv(), type_k, type_v, {}, 0, head.hp.head_dim,
         true) {}

namespace {

// Buffers for n rows.
void reserve(const DFlashHead& head, DFlashState& st, int n, ThreadPool& pool) {
    const HParams& hp = head.hp;
    const size_t rows = size_t(n), d = size_t(hp.n_embd);
    grow(st.c, d * rows);
    grow(st.x, d * rows);
    grow(st.h, d * rows);
    grow(st.q, size_t(hp.n_embd_q()) * rows);
    grow(st.att, size_t(hp.n_embd_q()) * rows);
    grow(st.k, size_t(hp.n_embd_kv()) * rows);
    grow(st.v, size_t(hp.n_embd_kv()) * rows);
    grow(st.out, d * rows);
    grow(st.ff_g, size_t(hp.n_ff) * rows);
    grow(st.ff_u, size_t(hp.n_ff) * rows);
    grow(st.cs, 2 * size_t(hp.n_rot) * rows);
    grow(st.scores, attention_scratch_floats(head.att, st.kv.n_ctx(), pool.size()));
}

// Normalises each of n_heads heads of x in place.
void head_norm(float* x, const float* w, int n_heads, int head_dim, float eps) {
    for (int h = 0; h < n_heads; ++h)
        rms_norm(x + h * head_dim, w, head_dim, eps, x + h * head_dim);
}

// The block's attention in layer il over n rows at cache rows past ..: every row sees the last
// kCrossCtx context rows and every block row (no causal mask); x += Wo attention.
void block_attention(const DFlashHead& head, const DFlashLayer& l, DFlashState& st, int il, int n,
                     ThreadPool& pool) {
    const HParams& hp = head.hp;
    const int64_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv();
    for (int t = 0; t < n; ++t)
        rms_norm(st.x.data() + d * t, l.attn_norm, d, hp.rms_eps, st.h.data() + d * t);
    const MatmulJob qkv[] = {
        {l.wq, st.q.data(), nq}, {l.wk, st.k.data(), nkv}, {l.wv, st.v.data(), nkv}};
    matmul_multi(qkv, st.h.data(), d, n, pool, st.mm);
    const int past = st.kv.n_past();
    for (int t = 0; t < n; ++t) {
        float *q = st.q.data() + nq * t, *k = st.k.data() + nkv * t;
        const float* cs = st.cs.data() + size_t(hp.n_rot) * t;
        head_norm(q, l.q_norm, hp.n_head, hp.head_dim, hp.rms_eps);
        head_norm(k, l.k_norm, hp.n_head_kv, hp.head_dim, hp.rms_eps);
        rope_apply(head.rope, cs, q, hp.n_head, hp.head_dim);
        rope_apply(head.rope, cs, k, hp.n_head_kv, hp.head_dim);
        st.kv.write(il, past + t, k, st.v.data() + nkv * t);
    }
    AttentionShape a = head.att;
    a.window = DFlashHead::kCrossCtx + n;
    for (int t = 0; t < n; ++t)
        attention(st.kv, il, past + n - 1, 1, st.q.data() + nq * t, st.att.data() + nq * t, a, pool,
                  st.scores.data());
    matmul(l.wo, st.att.data(), nq, n, st.out.data(), d, pool, st.mm);
    add_into_all(pool, st.x.data(), st.out.data(), d * n);
}

// x += ffn_down(silu(ffn_gate u) * ffn_up u), u = rms_norm(x) * post_attention_norm.
void block_ffn(const DFlashHead& head, const DFlashLayer& l, DFlashState& st, int n,
               ThreadPool& pool) {
    const HParams& hp = head.hp;
    const int64_t d = hp.n_embd, ff = hp.n_ff;
    for (int t = 0; t < n; ++t)
        rms_norm(st.x.data() + d * t, l.post_norm, d, hp.rms_eps, st.h.data() + d * t);
    const MatmulJob gu[] = {{l.ffn_gate, st.ff_g.data(), ff}, {l.ffn_up, st.ff_u.data(), ff}};
    matmul_multi(gu, st.h.data(), d, n, pool, st.mm);
    silu_mul_all(pool, st.ff_g.data(), st.ff_u.data(), ff * n);
    matmul(l.ffn_down, st.ff_g.data(), ff, n, st.out.data(), d, pool, st.mm);
    add_into_all(pool, st.x.data(), st.out.data(), d * n);
}

}  // namespace

void dflash_context(const DFlashHead& head, DFlashState& st, std::span<const token_id> tokens,
                    const float* features, int64_t ld, int pos0, ThreadPool& pool) {
    const HParams& hp = head.hp;
    const int n = int(tokens.size());
    if (n == 0) return;
    if (st.kv.n_past() + n > st.kv.n_ctx())
        fail("DFlash drafter: its cache of ", st.kv.n_ctx(), " positions is full (-c)");
    reserve(head, st, n, pool);
    const int64_t d = hp.n_embd, nkv = hp.n_embd_kv();
    matmul(head.fc, features, ld, n, st.c.data(), d, pool, st.mm);
    for (int t = 0; t < n; ++t) {
        rms_norm(st.c.data() + d * t, head.hidden_norm, d, hp.rms_eps, st.c.data() + d * t);
        rope_angles(head.rope_ctx, pos0 + t, st.cs.data() + size_t(hp.n_rot) * t);
    }
    const int past = st.kv.n_past();
    for (int il = 0; il < hp.n_layer; ++il) {
        const DFlashLayer& l = head.blk[size_t(il)];
        const MatmulJob kv[] = {{l.wk, st.k.data(), nkv}, {l.wv, st.v.data(), nkv}};
        matmul_multi(kv, st.c.data(), d, n, pool, st.mm);
        for (int t = 0; t < n; ++t) {
            float* k = st.k.data() + nkv * t;
            head_norm(k, l.k_norm, hp.n_head_kv, hp.head_dim, hp.rms_eps);
            rope_apply(head.rope_ctx, st.cs.data() + size_t(hp.n_rot) * t, k, hp.n_head_kv,
                       hp.head_dim);
            st.kv.write(il, past + t, k, st.v.data() + nkv * t);
        }
    }
    st.kv.append(tokens);
}

void dflash_block(const DFlashHead& head, DFlashState& st, token_id last, int n_mask, int pos0,
                  ThreadPool& pool) {
    const HParams& hp = head.hp;
    const int n = n_mask + 1, nv = head.target->hparams().n_vocab;
    if (n_mask < 1) return;
    if (st.kv.n_past() + n > st.kv.n_ctx())
        fail("DFlash drafter: its cache of ", st.kv.n_ctx(), " positions is full (-c)");
    if (last < 0 || last >= nv) fail("DFlash drafter: token id ", last, " outside the vocabulary");
    reserve(head, st, n, pool);
    const int64_t d = hp.n_embd;
    const WeightView& e = head.embed;
    for (int t = 0; t < n; ++t) {
        dequantize_row(e.type, e.row(t == 0 ? last : head.mask_token), st.x.data() + d * t, e.cols);
        rope_angles(head.rope, pos0 + t, st.cs.data() + size_t(hp.n_rot) * t);
    }
    for (int il = 0; il < hp.n_layer; ++il) {
        block_attention(head, head.blk[size_t(il)], st, il, n, pool);
        block_ffn(head, head.blk[size_t(il)], st, n, pool);
    }
    // The mask rows' logits (the block's rows are not appended: the cache keeps the context).
    for (int t = 1; t < n; ++t)
        rms_norm(st.x.data() + d * t, head.output_norm, d, hp.rms_eps, st.h.data() + d * (t - 1));
    st.logits.resize(size_t(nv) * size_t(n_mask));
    matmul(head.output, st.h.data(), d, n_mask, st.logits.data(), nv, pool, st.mm);
}

}  // namespace specula
