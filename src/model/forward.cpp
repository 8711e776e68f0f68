// Session: the llama/qwen2 forward pass over a batch of tokens with a KV cache, following
// llama.cpp's build_llama / build_qwen2 graphs op by op:
//   x = token_embd[id]
//   per layer: h = rms_norm(x) * attn_norm; q,k,v = W{q,k,v} h (+ bias); rope(q, k);
//              x += Wo attention(q, K, V) (+ bo)
//              h = rms_norm(x) * ffn_norm; x += down(silu(gate h) * up h)   (or the MoE)
//   logits = output (rms_norm(x) * output_norm)
// Matmuls take the whole batch (each weight streamed once); everything else is per token in a
// fixed order, which makes logits batch invariant. Buffers grow to the largest batch seen and
// are reused, so steady-state decoding allocates nothing.
#include <algorithm>
#include <cmath>
#include <thread>

#include "common/error.h"
#include "kernels/quants.h"
#include "model/attention.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/offload.h"
#include "model/ops.h"
#include "model/rope.h"

namespace specula {

namespace {

int resolve_threads(int n) {
    if (n > 0) return n;
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? static_cast<int>(hw) : 1;
}

int resolve_ctx(const HParams& hp, int n_ctx) {
    if (n_ctx < 0) fail("n_ctx must be >= 0, got ", n_ctx);
    if (n_ctx == 0) return std::min(hp.n_ctx_train, SessionParams::kDefaultMaxCtx);
    return n_ctx;
}

template <class T>
void grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

}  // namespace

struct Session::Impl {
    const Model& model;
    const HParams hp;
    ThreadPool pool;
    KVCache kv;
    MatmulScratch mm;
    MoeFFN moe;
    RopeParams rope;
    AttentionShape att_shape;

    std::unique_ptr<LayerOffload> offload;  // layers [0, offload->n_layers()) on a device

    int n_logits = 0;
    std::vector<float> x, h, q, k_new, v_new, att, tmp, ff_g, ff_u, rope_cs, logits, scores;

    Impl(const Model& m, const SessionParams& p)
        : model(m),
          hp(m.hparams()),
          pool(resolve_threads(p.n_threads)),
          kv(hp.n_layer, resolve_ctx(hp, p.n_ctx), hp.n_embd_kv()) {
        rope.n_rot = hp.n_rot;
        rope.neox = hp.rope_neox;
        rope.freq_base = hp.rope_freq_base;
        rope.freq_scale = hp.rope_freq_scale;
        rope.freq_factors = m.rope_freq_factors.empty() ? nullptr : m.rope_freq_factors.data();
        att_shape = {hp.n_head, hp.n_head_kv, hp.head_dim,
                     1.0f / std::sqrt(static_cast<float>(hp.head_dim))};
        scores.resize(attention_scratch_floats(att_shape, kv.n_ctx(), pool.size()));
        OffloadParams op =
            p.n_gpu_layers >= 0 ? OffloadParams{p.n_gpu_layers, p.gpu_device} : m.offload;
        op.n_ctx = kv.n_ctx();
        offload = make_offload(m, op);
    }

    void reserve(int ntok) {
        const size_t n = static_cast<size_t>(ntok);
        grow(x, n * hp.n_embd);
        grow(h, n * hp.n_embd);
        grow(tmp, n * hp.n_embd);
        grow(q, n * hp.n_embd_q());
        grow(k_new, n * hp.n_embd_kv());
        grow(v_new, n * hp.n_embd_kv());
        grow(att, n * hp.n_embd_q());
        grow(ff_g, n * hp.n_ff);
        grow(ff_u, n * hp.n_ff);
        grow(rope_cs, n * hp.n_rot);
        grow(logits, n * hp.n_vocab);
        if (hp.n_expert > 0) moe.reserve(hp, ntok);
    }

    void mm_(const WeightView& w, const float* in, int64_t ld_in, int ntok, float* out,
             int64_t ld_out) {
        matmul(w, in, ld_in, ntok, out, ld_out, pool, mm);
    }

    void norm_rows(const float* in, const float* w, int ntok, float* out) {
        for (int t = 0; t < ntok; ++t) {
            const size_t o = static_cast<size_t>(t) * hp.n_embd;
            rms_norm(in + o, w, hp.n_embd, hp.rms_eps, out + o);
        }
    }

    static void add_bias(float* y, const float* b, int ntok, int64_t width, int64_t ld) {
        if (!b) return;
        for (int t = 0; t < ntok; ++t) add_into(y + t * ld, b, width);
    }

    void embed(std::span<const token_id> tokens) {
        const WeightView& e = model.tok_embd;
        for (size_t t = 0; t < tokens.size(); ++t) {
            dequantize_row(e.type, e.row(tokens[t]), x.data() + t * hp.n_embd, e.cols);
        }
    }

    // K and V are computed for all ntok tokens; the attention output and the residual only for
    // rows [r0, ntok) (r0 > 0 in the last layer when only the last logits are wanted).
    void attention_block(const LayerWeights& l, int il, int pos0, int ntok, int r0) {
        const int64_t dq = hp.n_embd_q(), dkv = hp.n_embd_kv();
        norm_rows(x.data(), l.attn_norm, ntok, h.data());
        float* kc = k_new.data();
        float* vc = v_new.data();
        const MatmulJob qkv[] = {{l.wq, q.data(), dq}, {l.wk, kc, dkv}, {l.wv, vc, dkv}};
        matmul_multi(qkv, h.data(), hp.n_embd, ntok, pool, mm);
        add_bias(q.data(), l.bq, ntok, dq, dq);
        add_bias(kc, l.bk, ntok, dkv, dkv);
        add_bias(vc, l.bv, ntok, dkv, dkv);
        for (int t = 0; t < ntok; ++t) {
            const float* cs = rope_cs.data() + static_cast<size_t>(t) * hp.n_rot;
            rope_apply(rope, cs, q.data() + t * dq, hp.n_head, hp.head_dim);
            rope_apply(rope, cs, kc + t * dkv, hp.n_head_kv, hp.head_dim);
            // Every K/V row enters the cache through write() (the cache decides its storage).
            kv.write(il, pos0 + t, kc + t * dkv, vc + t * dkv);
        }
        const int n = ntok - r0;
        attention(kv, il, pos0 + r0, n, q.data() + r0 * dq, att.data(), att_shape, pool,
                  scores.data());
        mm_(l.wo, att.data(), dq, n, tmp.data(), hp.n_embd);
        add_bias(tmp.data(), l.bo, n, hp.n_embd, hp.n_embd);
        add_into(x.data() + static_cast<size_t>(r0) * hp.n_embd, tmp.data(),
                 static_cast<int64_t>(n) * hp.n_embd);
    }

    // The FFN and its residual for rows [r0, ntok) of x.
    void ffn_block(const LayerWeights& l, int ntok, int r0) {
        float* xr = x.data() + static_cast<size_t>(r0) * hp.n_embd;
        ntok -= r0;
        norm_rows(xr, l.ffn_norm, ntok, h.data());
        if (hp.n_expert > 0) {
            moe.forward(l, hp, h.data(), ntok, tmp.data(), pool, mm);
        } else {
            const MatmulJob gate_up[] = {{l.ffn_gate, ff_g.data(), hp.n_ff},
                                         {l.ffn_up, ff_u.data(), hp.n_ff}};
            matmul_multi(gate_up, h.data(), hp.n_embd, ntok, pool, mm);
            silu_mul(ff_g.data(), ff_u.data(), static_cast<int64_t>(ntok) * hp.n_ff);
            mm_(l.ffn_down, ff_g.data(), hp.n_ff, ntok, tmp.data(), hp.n_embd);
        }
        add_into(xr, tmp.data(), static_cast<int64_t>(ntok) * hp.n_embd);
    }

    void check(std::span<const token_id> tokens) const {
        const int64_t end = static_cast<int64_t>(kv.n_past()) + tokens.size();
        if (end > kv.n_ctx()) {
            fail("context overflow: ", kv.n_past(), " cached + ", tokens.size(),
                 " new tokens exceed n_ctx = ", kv.n_ctx());
        }
        for (token_id id : tokens) {
            if (id < 0 || id >= hp.n_vocab) {
                fail("token id ", id, " is out of range (n_vocab = ", hp.n_vocab, ")");
            }
        }
    }

    void eval(std::span<const token_id> tokens, bool all_logits) {
        check(tokens);
        const int ntok = static_cast<int>(tokens.size());
        n_logits = 0;
        if (ntok == 0) return;
        const int pos0 = kv.n_past();
        reserve(ntok);
        embed(tokens);
        for (int t = 0; t < ntok; ++t) {
            rope_angles(rope, pos0 + t, rope_cs.data() + static_cast<size_t>(t) * hp.n_rot);
        }
        // Only the rows whose logits are wanted go through the last layer's attention output and
        // FFN, the final norm and the output matmul (earlier layers feed every token's K and V).
        const int n_out = all_logits ? ntok : 1;
        int il0 = 0;
        if (offload) {  // the device runs the first layers (and maybe the head) on x
            il0 = offload->n_layers();
            offload->forward(x.data(), rope_cs.data(), ntok, pos0, n_out, logits.data());
            if (offload->has_output()) {
                kv.set_n_past(pos0 + ntok);
                n_logits = n_out;
                return;
            }
        }
        for (int il = il0; il < hp.n_layer; ++il) {
            const int r0 = il == hp.n_layer - 1 ? ntok - n_out : 0;
            attention_block(model.layers[il], il, pos0, ntok, r0);
            ffn_block(model.layers[il], ntok, r0);
        }
        const float* last = x.data() + static_cast<size_t>(ntok - n_out) * hp.n_embd;
        norm_rows(last, model.output_norm, n_out, h.data());
        mm_(model.output, h.data(), hp.n_embd, n_out, logits.data(), hp.n_vocab);
        kv.set_n_past(pos0 + ntok);
        n_logits = n_out;
    }
};

Session::Session(const Model& model, const SessionParams& params)
    : impl_(std::make_unique<Impl>(model, params)) {}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

void Session::eval(std::span<const token_id> tokens, bool all_logits) {
    impl_->eval(tokens, all_logits);
}

const float* Session::logits(int i) const {
    if (i < 0 || i >= impl_->n_logits) {
        fail("logits(", i, "): the last eval produced ", impl_->n_logits, " rows");
    }
    return impl_->logits.data() + static_cast<size_t>(i) * impl_->hp.n_vocab;
}

int Session::n_logits() const {
    return impl_->n_logits;
}
int Session::n_past() const {
    return impl_->kv.n_past();
}
int Session::n_ctx() const {
    return impl_->kv.n_ctx();
}
int Session::n_threads() const {
    return impl_->pool.size();
}
int Session::n_gpu_layers() const {
    return impl_->offload ? impl_->offload->n_layers() : 0;
}

void Session::rollback(int n_past) {
    if (n_past < 0 || n_past > impl_->kv.n_past()) {
        fail("rollback(", n_past, "): must be in [0, n_past = ", impl_->kv.n_past(), "]");
    }
    impl_->kv.set_n_past(n_past);
}

const Model& Session::model() const {
    return impl_->model;
}

}  // namespace specula
