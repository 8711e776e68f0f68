// The EAGLE-3 head's forward pass (eagle3_head.h): the encoder (fc over the target's features) and
// the one decoder layer over the head's own KV cache, built from the model's kernels (matmul,
// rms_norm, rope, the cached attention), row by row as model/blocks does it, so a row's result
// does not depend on how many rows share the pass.
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "kernels/ops.h"
#include "kernels/quants.h"
#include "model/blocks/pass_state.h"
#include "speculative/drafters/eagle3_head.h"

namespace specula {

Eagle3State::Eagle3State(const Eagle3Head& head, int n_ctx, KVType type_k, KVType type_v)
    : kv(1, n_ctx, head.hp.n_embd_kv(), type_k, type_v, {}, 0, head.hp.head_dim) {}

void eagle3_encode(const Eagle3Head& head, Eagle3State& st, const float* features, int64_t ld,
                   int n, ThreadPool& pool) {
    const int64_t d = head.hp.n_embd;
    grow(st.g, size_t(d * n));
    matmul(head.fc, features, ld, n, st.g.data(), d, pool, st.mm);
}

namespace {

// c = [rms_norm(embed(t)) * attn_norm | rms_norm(g) * hidden_norm] per row; x = the residual (g
// or its norm); rope angles at pos0 + t.
void decode_inputs(const Eagle3Head& head, Eagle3State& st, std::span<const token_id> tokens,
                   const float* g, int pos0) {
    const HParams& hp = head.hp;
    const int64_t d = hp.n_embd;
    const WeightView& e = head.embed;
    for (size_t t = 0; t < tokens.size(); ++t) {
        float* c = st.cat.data() + 2 * d * t;
        dequantize_row(e.type, e.row(tokens[t]), c, e.cols);
        rms_norm(c, head.attn_norm, d, hp.rms_eps, c);
        rms_norm(g + d * t, head.hidden_norm, d, hp.rms_eps, c + d);
        std::memcpy(st.x.data() + d * t, head.norm_before_residual ? c + d : g + d * t,
                    sizeof(float) * size_t(d));
        rope_angles(head.rope, pos0 + int(t), st.cs.data() + size_t(hp.n_rot) * t);
    }
}

// The attention block: q, k, v of c; rope; the cache; x += Wo attention.
void decode_attention(const Eagle3Head& head, Eagle3State& st, int n, ThreadPool& pool) {
    const HParams& hp = head.hp;
    const int64_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv();
    const MatmulJob qkv[] = {
        {head.wq, st.q.data(), nq}, {head.wk, st.k.data(), nkv}, {head.wv, st.v.data(), nkv}};
    matmul_multi(qkv, st.cat.data(), 2 * d, n, pool, st.mm);
    const int past = st.kv.n_past();
    for (int t = 0; t < n; ++t) {
        const float* cs = st.cs.data() + size_t(hp.n_rot) * t;
        rope_apply(head.rope, cs, st.q.data() + nq * t, hp.n_head, hp.head_dim);
        rope_apply(head.rope, cs, st.k.data() + nkv * t, hp.n_head_kv, hp.head_dim);
        st.kv.write(0, past + t, st.k.data() + nkv * t, st.v.data() + nkv * t);
    }
    attention(st.kv, 0, past, n, st.q.data(), st.att.data(), head.att, pool, st.scores.data());
    matmul(head.wo, st.att.data(), nq, n, st.out.data(), d, pool, st.mm);
    add_into_all(pool, st.x.data(), st.out.data(), d * n);
}

// x += ffn_down(silu(ffn_gate h) * ffn_up h), h = rms_norm(x) * ffn_norm.
void decode_ffn(const Eagle3Head& head, Eagle3State& st, int n, ThreadPool& pool) {
    const HParams& hp = head.hp;
    const int64_t d = hp.n_embd, ff = hp.n_ff;
    for (int t = 0; t < n; ++t)
        rms_norm(st.x.data() + d * t, head.ffn_norm, d, hp.rms_eps, st.h.data() + d * t);
    const MatmulJob gu[] = {{head.ffn_gate, st.ff_g.data(), ff}, {head.ffn_up, st.ff_u.data(), ff}};
    matmul_multi(gu, st.h.data(), d, n, pool, st.mm);
    silu_mul_all(pool, st.ff_g.data(), st.ff_u.data(), ff * n);
    matmul(head.ffn_down, st.ff_g.data(), ff, n, st.out.data(), d, pool, st.mm);
    add_into_all(pool, st.x.data(), st.out.data(), d * n);
}

// The last row's logits, over the target's vocabulary (through d2t: the other tokens -inf).
void decode_logits(const Eagle3Head& head, Eagle3State& st, int n, ThreadPool& pool) {
    const HParams& hp = head.hp;
    const int64_t d = hp.n_embd;
    const int nv = head.target->hparams().n_vocab, no = head.n_out();
    rms_norm(st.x.data() + d * (n - 1), head.output_norm, d, hp.rms_eps, st.h.data());
    st.logits.resize(size_t(nv));
    if (head.d2t.empty()) {
        matmul(head.output, st.h.data(), d, 1, st.logits.data(), nv, pool, st.mm);
        return;
    }
    grow(st.out, size_t(no));
    matmul(head.output, st.h.data(), d, 1, st.out.data(), no, pool, st.mm);
    std::fill(st.logits.begin(), st.logits.end(), -std::numeric_limits<float>::infinity());
    for (int i = 0; i < no; ++i) st.logits[size_t(head.d2t[size_t(i)])] = st.out[size_t(i)];
}

}  // namespace

void eagle3_decode(const Eagle3Head& head, Eagle3State& st, std::span<const token_id> tokens,
                   const float* g, int pos0, ThreadPool& pool) {
    const HParams& hp = head.hp;
    const int n = int(tokens.size());
    if (n == 0) return;
    if (st.kv.n_past() + n > st.kv.n_ctx())
        fail("EAGLE-3 head: its cache of ", st.kv.n_ctx(), " positions is full (-c)");
    const int nv = head.target->hparams().n_vocab;
    for (token_id t : tokens)
        if (t < 0 || t >= nv) fail("EAGLE-3 head: token id ", t, " outside the vocabulary");
    const size_t d = size_t(hp.n_embd), rows = size_t(n);
    grow(st.cat, 2 * d * rows);
    grow(st.x, d * rows);
    grow(st.h, d * rows);
    grow(st.q, size_t(hp.n_embd_q()) * rows);
    grow(st.att, size_t(hp.n_embd_q()) * rows);
    grow(st.k, size_t(hp.n_embd_kv()) * rows);
    grow(st.v, size_t(hp.n_embd_kv()) * rows);
    grow(st.out, d * rows);
    grow(st.ff_g, size_t(hp.n_ff) * rows);
    grow(st.ff_u, size_t(hp.n_ff) * rows);
    grow(st.cs, size_t(hp.n_rot) * rows);
    grow(st.scores, attention_scratch_floats(head.att, st.kv.n_ctx(), pool.size()));
    decode_inputs(head, st, tokens, g, pos0);
    decode_attention(head, st, n, pool);
    decode_ffn(head, st, n, pool);
    st.kv.append(tokens);
    grow(st.hidden, d * rows);
    std::memcpy(st.hidden.data(), st.x.data(), sizeof(float) * d * rows);
    decode_logits(head, st, n, pool);
}

}  // namespace specula
