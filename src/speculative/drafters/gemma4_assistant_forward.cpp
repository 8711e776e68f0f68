// Gemma 4's assistant, one step (gemma4_assistant_head.h): one row through the model's kernels
// (matmul, rms_norm, rope, the cached attention over the target's KV cache).
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "kernels/ops.h"
#include "kernels/quants.h"
#include "model/blocks/pass_state.h"
#include "speculative/drafters/gemma4_assistant_head.h"

namespace specula {

namespace {

void size_buffers(const Gemma4Assistant& a, Gemma4AssistantState& st, const KVCache& kv,
                  int n_threads) {
    const HParams& hp = a.hp;
    const size_t d = size_t(hp.n_embd), dq = size_t(hp.max_n_embd_q());
    grow(st.in, 2 * size_t(a.n_backbone));
    grow(st.x, d);
    grow(st.h, d);
    grow(st.tmp, d);
    grow(st.q, dq);
    grow(st.att, dq);
    grow(st.ff_g, size_t(hp.max_n_ff()));
    grow(st.ff_u, size_t(hp.max_n_ff()));
    grow(st.cs, size_t(hp.max_head_dim()));
    for (const Gemma4AssistantLayer& l : a.layers)
        grow(st.scores, attention_scratch_floats(l.att, kv.n_ctx(), n_threads));
    st.logits.resize(size_t(a.n_vocab()));
    st.hidden.resize(size_t(a.n_backbone));
}

// x += rms_norm(Wo attention(q)) * post_attention_norm, q from rms_norm(x) * attn_norm.
void attention_block(const Gemma4Assistant& a, const Gemma4AssistantLayer& l,
                     Gemma4AssistantState& st, const KVCache& kv, int pos, ThreadPool& pool) {
    const HParams& hp = a.hp;
    const int64_t d = hp.n_embd, hd = l.att.head_dim, dq = int64_t(l.att.n_head) * hd;
    rms_norm(st.x.data(), l.attn_norm, d, hp.rms_eps, st.h.data());
    matmul(l.wq, st.h.data(), d, 1, st.q.data(), dq, pool, st.mm);
    for (int h = 0; h < l.att.n_head; ++h)
        rms_norm(st.q.data() + h * hd, l.q_norm, hd, hp.rms_eps, st.q.data() + h * hd);
    rope_angles(l.rope, pos, st.cs.data());
    rope_apply(l.rope, st.cs.data(), st.q.data(), l.att.n_head, int(hd));
    attention(kv, l.kv_layer, pos - 1, 1, st.q.data(), st.att.data(), l.att, pool,
              st.scores.data());
    matmul(l.wo, st.att.data(), dq, 1, st.tmp.data(), d, pool, st.mm);
    rms_norm(st.tmp.data(), l.attn_post_norm, d, hp.rms_eps, st.tmp.data());
    add_into(st.x.data(), st.tmp.data(), d);
}

// x += rms_norm(down(gelu(gate h) * up h)) * post_ffw_norm, h = rms_norm(x) * ffn_norm.
void ffn_block(const Gemma4Assistant& a, const Gemma4AssistantLayer& l, Gemma4AssistantState& st,
               ThreadPool& pool) {
    const HParams& hp = a.hp;
    const int64_t d = hp.n_embd, ff = l.ffn_gate.rows;
    rms_norm(st.x.data(), l.ffn_norm, d, hp.rms_eps, st.h.data());
    const MatmulJob gu[] = {{l.ffn_gate, st.ff_g.data(), ff}, {l.ffn_up, st.ff_u.data(), ff}};
    matmul_multi(gu, st.h.data(), d, 1, pool, st.mm);
    gelu_mul(st.ff_g.data(), st.ff_u.data(), ff);
    matmul(l.ffn_down, st.ff_g.data(), ff, 1, st.tmp.data(), d, pool, st.mm);
    rms_norm(st.tmp.data(), l.ffn_post_norm, d, hp.rms_eps, st.tmp.data());
    add_into(st.x.data(), st.tmp.data(), d);
}

}  // namespace

void gemma4_assistant_step(const Gemma4Assistant& a, Gemma4AssistantState& st, const KVCache& kv,
                           int pos, token_id t, const float* h, ThreadPool& pool) {
    const HParams& hp = a.hp;
    const Model& target = *a.target;
    const int nv = target.hparams().n_vocab;
    if (t < 0 || t >= nv) fail("Gemma 4 assistant: token id ", t, " outside the vocabulary");
    if (pos < 1 || pos > kv.n_past())
        fail("Gemma 4 assistant: position ", pos, " needs the target's cache up to ", pos - 1,
             ", it holds ", kv.n_past(), " positions");
    size_buffers(a, st, kv, pool.size());
    const int64_t d = hp.n_embd, nb = a.n_backbone;
    // x = pre_proj [embed(t) * sqrt(D) | h], the target's embedding as the target scales it.
    const WeightView& e = target.tok_embd;
    dequantize_row(e.type, e.row(t), st.in.data(), e.cols);
    const float scale = std::sqrt(float(nb));
    for (int64_t i = 0; i < nb; ++i) st.in[size_t(i)] *= scale;
    std::memcpy(st.in.data() + nb, h, sizeof(float) * size_t(nb));
    matmul(a.pre_proj, st.in.data(), 2 * nb, 1, st.x.data(), d, pool, st.mm);
    for (const Gemma4AssistantLayer& l : a.layers) {
        attention_block(a, l, st, kv, pos, pool);
        ffn_block(a, l, st, pool);
        if (l.out_scale)
            for (int64_t i = 0; i < d; ++i) st.x[size_t(i)] *= l.out_scale[0];
    }
    rms_norm(st.x.data(), a.output_norm, d, hp.rms_eps, st.h.data());
    const MatmulJob out[] = {{a.output, st.logits.data(), a.n_vocab()},
                             {a.post_proj, st.hidden.data(), nb}};
    matmul_multi(out, st.h.data(), d, 1, pool, st.mm);
}

}  // namespace specula
