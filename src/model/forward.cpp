// Session and ForwardPass: the llama/qwen2 forward pass over a batch of tokens with a KV cache,
// following llama.cpp's build_llama / build_qwen2 graphs op by op:
//   x = token_embd[id]
//   per layer: h = rms_norm(x) * attn_norm; q,k,v = W{q,k,v} h (+ bias); rope(q, k);
//              x += Wo attention(q, K, V) (+ bo)
//              h = rms_norm(x) * ffn_norm; x += down(silu(gate h) * up h)   (or the MoE)
//   logits = output (rms_norm(x) * output_norm)
// A pass holds rows of one or more sequences (segments). Matmuls take every row of the pass (each
// weight streamed once); attention runs per segment over that segment's own cache; everything
// else is per row in a fixed order, which makes a row's logits independent of the pass it shares.
// Buffers grow to the largest pass seen and are reused, so steady-state decoding allocates
// nothing.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "kernels/quants.h"
#include "model/forward_pass.h"
#include "model/offload.h"
#include "model/ops.h"

namespace specula {

namespace {

int resolve_threads(int n) {
    return n > 0 ? n : hardware_threads();
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

void add_bias(float* y, const float* b, int ntok, int64_t width, int64_t ld) {
    if (!b) return;
    for (int t = 0; t < ntok; ++t) add_into(y + t * ld, b, width);
}

// Elements from which an elementwise op of the pass is split over the pool: prompt-sized passes
// only (a decode step's or a 9-token verify's silu_mul takes microseconds, about what one more
// wake-up of the pool costs on a loaded machine).
constexpr int64_t kParallelElems = 1 << 17;

// fn(b, e) over [0, n) in items of `width` elements: on the pool's threads when the whole is big
// enough, else on this one. Every element goes through the same operations either way, so the
// split changes no bit.
template <class F>
void over_items(ThreadPool& pool, int64_t n, int64_t width, F&& fn) {
    if (n * width < kParallelElems || pool.size() == 1) return fn(int64_t{0}, n);
    pool.parallel_for(n, fn);
}

// g = silu(g) * u and y += x over n elements, split over the pool (in pieces of 16 elements).
void silu_mul_all(ThreadPool& pool, float* g, const float* u, int64_t n) {
    over_items(pool, (n + 15) / 16, 16, [&](int64_t b, int64_t e) {
        silu_mul(g + 16 * b, u + 16 * b, std::min(n, 16 * e) - 16 * b);
    });
}
void add_into_all(ThreadPool& pool, float* y, const float* x, int64_t n) {
    over_items(pool, (n + 15) / 16, 16, [&](int64_t b, int64_t e) {
        add_into(y + 16 * b, x + 16 * b, std::min(n, 16 * e) - 16 * b);
    });
}

}  // namespace

Session::Impl::Impl(const Model& m, const SessionParams& p)
    : model(m),
      own_pool(p.pool ? nullptr : std::make_unique<ThreadPool>(resolve_threads(p.n_threads))),
      pool(p.pool ? p.pool : own_pool.get()),
      kv(m.hparams().n_layer, resolve_ctx(m.hparams(), p.n_ctx), m.hparams().n_embd_kv(), p.type_k,
         p.type_v) {
    OffloadParams op =
        p.n_gpu_layers >= 0 ? OffloadParams{p.n_gpu_layers, p.gpu_device} : m.offload;
    op.n_ctx = kv.n_ctx();
    offload = make_offload(m, op);
}

Session::Impl::~Impl() = default;

void Session::Impl::check(std::span<const token_id> tokens) const {
    const int64_t end = static_cast<int64_t>(kv.n_past()) + tokens.size();
    if (end > kv.n_ctx()) {
        fail("context overflow: ", kv.n_past(), " cached + ", tokens.size(),
             " new tokens exceed n_ctx = ", kv.n_ctx());
    }
    const int n_vocab = model.hparams().n_vocab;
    for (token_id id : tokens) {
        if (id < 0 || id >= n_vocab) {
            fail("token id ", id, " is out of range (n_vocab = ", n_vocab, ")");
        }
    }
}

ForwardPass::ForwardPass(const Model& model) : model_(model), hp_(model.hparams()) {
    rope_.n_rot = hp_.n_rot;
    rope_.neox = hp_.rope_neox;
    rope_.freq_base = hp_.rope_freq_base;
    rope_.freq_scale = hp_.rope_freq_scale;
    rope_.freq_factors = model.rope_freq_factors.empty() ? nullptr : model.rope_freq_factors.data();
    att_shape_ = {hp_.n_head, hp_.n_head_kv, hp_.head_dim,
                  1.0f / std::sqrt(static_cast<float>(hp_.head_dim))};
}

void ForwardPass::reserve(int ntok, int max_ctx, int n_threads) {
    const size_t n = static_cast<size_t>(ntok);
    grow(x_, n * hp_.n_embd);
    grow(h_, n * hp_.n_embd);
    grow(tmp_, n * hp_.n_embd);
    grow(q_, n * hp_.n_embd_q());
    grow(k_new_, n * hp_.n_embd_kv());
    grow(v_new_, n * hp_.n_embd_kv());
    grow(att_, n * hp_.n_embd_q());
    grow(ff_g_, n * hp_.n_ff);
    grow(ff_u_, n * hp_.n_ff);
    grow(rope_cs_, n * hp_.n_rot);
    grow(logits_, n * hp_.n_vocab);
    grow(scores_, attention_scratch_floats(att_shape_, max_ctx, n_threads));
    if (hp_.n_expert > 0) moe_.reserve(hp_, ntok);
}

void ForwardPass::norm_rows(const float* in, const float* w, int ntok, float* out,
                            ThreadPool& pool) {
    over_items(pool, ntok, hp_.n_embd, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const size_t o = static_cast<size_t>(t) * hp_.n_embd;
            rms_norm(in + o, w, hp_.n_embd, hp_.rms_eps, out + o);
        }
    });
}

// K and V are computed for every row; in the last layer (`last`) the attention output and the
// residual only for each segment's output rows, which are first moved together to the front of
// x (segment by segment, in order, so no row is overwritten before it moves).
void ForwardPass::attention_block(std::span<const PassSegment> segs, int il, bool last,
                                  ThreadPool& pool) {
    const LayerWeights& l = model_.layers[il];
    const int64_t dq = hp_.n_embd_q(), dkv = hp_.n_embd_kv();
    const int ntok = n_rows_;
    norm_rows(x_.data(), l.attn_norm, ntok, h_.data(), pool);
    float* kc = k_new_.data();
    float* vc = v_new_.data();
    const MatmulJob qkv[] = {{l.wq, q_.data(), dq}, {l.wk, kc, dkv}, {l.wv, vc, dkv}};
    matmul_multi(qkv, h_.data(), hp_.n_embd, ntok, pool, mm_);
    add_bias(q_.data(), l.bq, ntok, dq, dq);
    add_bias(kc, l.bk, ntok, dkv, dkv);
    add_bias(vc, l.bv, ntok, dkv, dkv);
    for (size_t s = 0; s < segs.size(); ++s) {
        KVCache& kv = segs[s].seq->kv;
        const int pos0 = kv.n_past();
        for (int t = off_[s]; t < off_[s] + n_[s]; ++t) {
            const float* cs = rope_cs_.data() + static_cast<size_t>(t) * hp_.n_rot;
            rope_apply(rope_, cs, q_.data() + t * dq, hp_.n_head, hp_.head_dim);
            rope_apply(rope_, cs, kc + t * dkv, hp_.n_head_kv, hp_.head_dim);
            // Every K/V row enters the cache through write() (the cache decides its storage).
            kv.write(il, pos0 + t - off_[s], kc + t * dkv, vc + t * dkv);
        }
    }
    for (size_t s = 0; s < segs.size(); ++s) {
        const KVCache& kv = segs[s].seq->kv;
        const int r0 = last ? n_[s] - n_out_[s] : 0;  // first row of the segment to finish
        const int n = n_[s] - r0;
        const int dst = last ? out_off_[s] : off_[s];
        if (n == 0) continue;
        attention(kv, il, kv.n_past() + r0, n, q_.data() + (off_[s] + r0) * dq,
                  att_.data() + dst * dq, att_shape_, pool, scores_.data());
        if (last && dst != off_[s] + r0) {
            std::memmove(x_.data() + static_cast<size_t>(dst) * hp_.n_embd,
                         x_.data() + static_cast<size_t>(off_[s] + r0) * hp_.n_embd,
                         sizeof(float) * n * hp_.n_embd);
        }
    }
    const int nr = last ? n_out_rows_ : ntok;
    matmul(l.wo, att_.data(), dq, nr, tmp_.data(), hp_.n_embd, pool, mm_);
    add_bias(tmp_.data(), l.bo, nr, hp_.n_embd, hp_.n_embd);
    add_into_all(pool, x_.data(), tmp_.data(), static_cast<int64_t>(nr) * hp_.n_embd);
}

// The FFN and its residual for rows [0, nrows) of x.
void ForwardPass::ffn_block(const LayerWeights& l, int nrows, ThreadPool& pool) {
    norm_rows(x_.data(), l.ffn_norm, nrows, h_.data(), pool);
    if (hp_.n_expert > 0) {
        moe_.forward(l, hp_, h_.data(), nrows, tmp_.data(), pool, mm_);
    } else {
        const MatmulJob gate_up[] = {{l.ffn_gate, ff_g_.data(), hp_.n_ff},
                                     {l.ffn_up, ff_u_.data(), hp_.n_ff}};
        matmul_multi(gate_up, h_.data(), hp_.n_embd, nrows, pool, mm_);
        silu_mul_all(pool, ff_g_.data(), ff_u_.data(), static_cast<int64_t>(nrows) * hp_.n_ff);
        matmul(l.ffn_down, ff_g_.data(), hp_.n_ff, nrows, tmp_.data(), hp_.n_embd, pool, mm_);
    }
    add_into_all(pool, x_.data(), tmp_.data(), static_cast<int64_t>(nrows) * hp_.n_embd);
}

void ForwardPass::run(std::span<const PassSegment> segs, ThreadPool& pool) {
    const size_t ns = segs.size();
    off_.resize(ns);
    n_.resize(ns);
    out_off_.resize(ns);
    n_out_.resize(ns);
    n_rows_ = n_out_rows_ = 0;
    int max_ctx = 1;
    for (size_t s = 0; s < ns; ++s) {
        off_[s] = n_rows_;
        n_[s] = static_cast<int>(segs[s].tokens.size());
        out_off_[s] = n_out_rows_;
        n_out_[s] = segs[s].all_logits ? n_[s] : std::min(n_[s], 1);
        n_rows_ += n_[s];
        n_out_rows_ += n_out_[s];
        max_ctx = std::max(max_ctx, segs[s].seq->kv.n_ctx());
        segs[s].seq->n_logits = 0;
    }
    if (n_rows_ == 0) return;
    reserve(n_rows_, max_ctx, pool.size());
    const WeightView& e = model_.tok_embd;
    for (size_t s = 0; s < ns; ++s) {
        const int pos0 = segs[s].seq->kv.n_past();
        for (int t = 0; t < n_[s]; ++t) {
            const size_t row = static_cast<size_t>(off_[s] + t);
            dequantize_row(e.type, e.row(segs[s].tokens[t]), x_.data() + row * hp_.n_embd, e.cols);
            rope_angles(rope_, pos0 + t, rope_cs_.data() + row * hp_.n_rot);
        }
    }
    // A session with a device offload runs alone (BatchEvaluator evaluates such sessions one by
    // one): the device runs the first layers (and maybe the head) on x.
    int il0 = 0;
    if (LayerOffload* off = ns == 1 ? segs[0].seq->offload.get() : nullptr) {
        Session::Impl& seq = *segs[0].seq;
        il0 = off->n_layers();
        if (off->has_output()) {
            grow(seq.logits, static_cast<size_t>(n_out_[0]) * hp_.n_vocab);
            off->forward(x_.data(), rope_cs_.data(), n_rows_, seq.kv.n_past(), n_out_[0],
                         seq.logits.data(), pool);
            seq.n_logits = n_out_[0];
            seq.kv.set_n_past(seq.kv.n_past() + n_[0]);
            return;
        }
        off->forward(x_.data(), rope_cs_.data(), n_rows_, seq.kv.n_past(), n_out_[0],
                     logits_.data(), pool);
    }
    // Only the rows whose logits are wanted go through the last layer's attention output and
    // FFN, the final norm and the output matmul (earlier layers feed every token's K and V).
    for (int il = il0; il < hp_.n_layer; ++il) {
        const bool last = il == hp_.n_layer - 1;
        attention_block(segs, il, last, pool);
        ffn_block(model_.layers[il], last ? n_out_rows_ : n_rows_, pool);
    }
    norm_rows(x_.data(), model_.output_norm, n_out_rows_, h_.data(), pool);
    matmul(model_.output, h_.data(), hp_.n_embd, n_out_rows_, logits_.data(), hp_.n_vocab, pool,
           mm_);
    const size_t nv = static_cast<size_t>(hp_.n_vocab);
    for (size_t s = 0; s < ns; ++s) {
        Session::Impl& seq = *segs[s].seq;
        grow(seq.logits, static_cast<size_t>(n_out_[s]) * nv);
        std::memcpy(seq.logits.data(), logits_.data() + out_off_[s] * nv,
                    sizeof(float) * n_out_[s] * nv);
        seq.n_logits = n_out_[s];
        seq.kv.set_n_past(seq.kv.n_past() + n_[s]);
    }
}

Session::Session(const Model& model, const SessionParams& params)
    : impl_(std::make_unique<Impl>(model, params)) {}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

void Session::eval(std::span<const token_id> tokens, bool all_logits) {
    Impl& s = *impl_;
    s.check(tokens);
    if (!s.pass) s.pass = std::make_unique<ForwardPass>(s.model);
    const PassSegment seg{&s, tokens, all_logits};
    s.pass->run(std::span(&seg, 1), *s.pool);
}

const float* Session::logits(int i) const {
    if (i < 0 || i >= impl_->n_logits) {
        fail("logits(", i, "): the last eval produced ", impl_->n_logits, " rows");
    }
    return impl_->logits.data() + static_cast<size_t>(i) * impl_->model.hparams().n_vocab;
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
    return impl_->pool->size();
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
