// ForwardPass: the forward pass over a batch of tokens with a KV cache, following llama.cpp's
// graphs op by op:
//   x = token_embd[id]
//   per layer: the architecture's block (model/arch.h), made of the steps below, e.g. llama's
//              h = rms_norm(x) * attn_norm; q,k,v = W{q,k,v} h (+ bias); rope(q, k);
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
#include "model/arch.h"
#include "model/forward_pass.h"
#include "model/ops.h"

namespace specula {

namespace {

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
void gelu_mul_all(ThreadPool& pool, float* g, const float* u, int64_t n) {
    over_items(pool, (n + 15) / 16, 16, [&](int64_t b, int64_t e) {
        gelu_mul(g + 16 * b, u + 16 * b, std::min(n, 16 * e) - 16 * b);
    });
}
void add_into_all(ThreadPool& pool, float* y, const float* x, int64_t n) {
    over_items(pool, (n + 15) / 16, 16, [&](int64_t b, int64_t e) {
        add_into(y + 16 * b, x + 16 * b, std::min(n, 16 * e) - 16 * b);
    });
}

}  // namespace

ForwardPass::ForwardPass(const Model& model) : model_(model), hp_(model.hparams()) {
    rope_.n_rot = hp_.n_rot;
    rope_.neox = hp_.rope_neox;
    rope_.freq_base = hp_.rope_freq_base;
    rope_.freq_scale = hp_.rope_freq_scale;
    if (hp_.rope_yarn) {
        rope_.ext_factor = 1.0f;
        rope_yarn_corr_dims(hp_.n_rot, hp_.n_ctx_orig, hp_.rope_freq_base, hp_.rope_yarn_beta_fast,
                            hp_.rope_yarn_beta_slow, rope_.corr_dims);
    }
    rope_.attn_factor = hp_.rope_attn_factor;
    rope_swa_ = rope_;
    rope_swa_.freq_base = hp_.rope_freq_base_swa;
    rope_swa_.freq_scale = hp_.rope_freq_scale_swa;
    if (hp_.rope_yarn) {
        rope_yarn_corr_dims(hp_.n_rot, hp_.n_ctx_orig, hp_.rope_freq_base_swa,
                            hp_.rope_yarn_beta_fast, hp_.rope_yarn_beta_slow, rope_swa_.corr_dims);
    }
    // Sliding-window layers need their own angles only when they rotate differently (gemma3);
    // phi3's window layers, and gpt-oss's, share the global ones.
    swa_rope_ = hp_.any_swa() && (hp_.rope_freq_base_swa != hp_.rope_freq_base ||
                                  hp_.rope_freq_scale_swa != hp_.rope_freq_scale);
    att_shape_ = {
        hp_.n_head, hp_.n_head_kv, hp_.head_dim,
        hp_.attn_scale > 0 ? hp_.attn_scale : 1.0f / std::sqrt(static_cast<float>(hp_.head_dim))};
    att_shape_.softcap = hp_.attn_softcap;
    // Fused matrices are bound in every layer or in none (model/arch/phi3.cpp).
    if (!model.layers.empty()) qkv_width_ = model.layers[0].wqkv.rows;
    if (hp_.n_recurrent() > 0) dn_shape_ = delta_net_shape(hp_);
    ff_width_ = !model.layers.empty() && model.layers[0].ffn_gate_up.data ? 2 * int64_t{hp_.n_ff}
                                                                          : int64_t{hp_.n_ff};
}

// As ik_llama.cpp picks them: rope_freqs when the file has them, else LongRoPE's long factors
// for a context beyond the training one and its short ones otherwise (none when absent).
const float* ForwardPass::rope_factors(int n_ctx) const {
    if (!model_.rope_freq_factors.empty()) return model_.rope_freq_factors.data();
    const auto& f = n_ctx > hp_.n_ctx_orig ? model_.rope_factors_long : model_.rope_factors_short;
    return f.empty() ? nullptr : f.data();
}

template <class F>
void ForwardPass::each_buffer(int ntok, int logit_rows, F&& f) {
    const size_t n = static_cast<size_t>(ntok);
    f(x_, n * hp_.n_embd);
    f(h_, n * hp_.n_embd);
    f(tmp_, n * hp_.n_embd);
    f(q_, n * hp_.n_embd_q());
    f(k_new_, n * hp_.n_embd_kv());
    f(v_new_, n * hp_.n_embd_kv());
    f(att_, n * hp_.n_embd_q());
    f(ff_g_, n * ff_width_);
    if (qkv_width_ > 0) f(qkv_, n * qkv_width_);
    f(ff_u_, n * hp_.n_ff);
    f(rope_cs_, n * hp_.n_rot);
    if (swa_rope_) f(rope_cs_swa_, n * hp_.n_rot);
    f(logits_, size_t(logit_rows) * hp_.n_vocab);
    if (hp_.attn_gated) {
        f(qg_, 2 * n * hp_.n_embd_q());
        f(gate_, n * hp_.n_embd_q());
    }
    if (hp_.n_recurrent() > 0) {
        const size_t nv = size_t(hp_.ssm_dt_rank);
        f(dn_x_, n * hp_.ssm_conv_dim());
        f(dn_scratch_, n * hp_.ssm_conv_dim());
        f(dn_z_, n * hp_.ssm_value_dim());
        f(dn_o_, n * hp_.ssm_value_dim());
        f(dn_b_, n * nv);
        f(dn_a_, n * nv);
        f(dn_g_, n * nv);
    }
    if (hp_.n_ff_shexp > 0) {
        f(sh_g_, n * hp_.n_ff_shexp);
        f(sh_u_, n * hp_.n_ff_shexp);
        f(sh_d_, n * hp_.n_embd);
    }
}

void ForwardPass::reserve(int ntok, int logit_rows, int max_ctx, int n_threads) {
    each_buffer(ntok, logit_rows, [](std::vector<float>& v, size_t n) { grow(v, n); });
    grow(scores_, attention_scratch_floats(att_shape_, max_ctx, n_threads));
    if (hp_.n_expert > 0) moe_.reserve(hp_, ntok);
}

double ForwardPass::buffer_bytes(int ntok, int logit_rows) {
    double b = 0;
    each_buffer(ntok, logit_rows, [&](std::vector<float>&, size_t n) { b += sizeof(float) * n; });
    if (hp_.n_expert > 0) b += MoeFFN::bytes(hp_, ntok);
    if (model_.has_mtp()) b += sizeof(float) * 2.0 * hp_.n_embd * ntok;  // mtp_cat_
    return b;
}

double ForwardPass::allocated_bytes() const {
    double b = 0;
    const_cast<ForwardPass*>(this)->each_buffer(
        0, 0, [&](std::vector<float>& v, size_t) { b += sizeof(float) * v.capacity(); });
    return b + moe_.allocated_bytes() + sizeof(float) * double(mtp_cat_.capacity());
}

void ForwardPass::norm_rows(const float* in, const float* w, int ntok, float* out) {
    over_items(*pool_, ntok, hp_.n_embd, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const size_t o = static_cast<size_t>(t) * hp_.n_embd;
            rms_norm(in + o, w, hp_.n_embd, hp_.rms_eps, out + o);
        }
    });
}

// K and V are computed for every row; in the last layer the attention output and the residual
// only for each segment's output rows, which are first moved together to the front of x (segment
// by segment, in order, so no row is overwritten before it moves).
void ForwardPass::attention_input(const LayerWeights& l) {
    ThreadPool& pool = *pool_;
    const int64_t dq = hp_.n_embd_q(), dkv = hp_.n_embd_kv();
    const int ntok = n_rows_;
    norm_rows(x_.data(), l.attn_norm, ntok, h_.data());
    const MatmulJob qkv[] = {
        {l.wq, q_.data(), dq}, {l.wk, k_new_.data(), dkv}, {l.wv, v_new_.data(), dkv}};
    matmul_multi(qkv, h_.data(), hp_.n_embd, ntok, pool, mm_);
    add_bias(q_.data(), l.bq, ntok, dq, dq);
    add_bias(k_new_.data(), l.bk, ntok, dkv, dkv);
    add_bias(v_new_.data(), l.bv, ntok, dkv, dkv);
}

void ForwardPass::attention_input_fused(const LayerWeights& l) {
    const int64_t dq = hp_.n_embd_q(), dkv = hp_.n_embd_kv(), w = qkv_width_;
    const int ntok = n_rows_;
    norm_rows(x_.data(), l.attn_norm, ntok, h_.data());
    matmul(l.wqkv, h_.data(), hp_.n_embd, ntok, qkv_.data(), w, *pool_, mm_);
    for (int t = 0; t < ntok; ++t) {
        const float* r = qkv_.data() + t * w;
        std::memcpy(q_.data() + t * dq, r, sizeof(float) * dq);
        std::memcpy(k_new_.data() + t * dkv, r + dq, sizeof(float) * dkv);
        std::memcpy(v_new_.data() + t * dkv, r + dq + dkv, sizeof(float) * dkv);
    }
}

void ForwardPass::gated_attention_input(const LayerWeights& l) {
    const int64_t dq = hp_.n_embd_q(), dkv = hp_.n_embd_kv(), hd = hp_.head_dim;
    const int ntok = n_rows_;
    norm_rows(x_.data(), l.attn_norm, ntok, h_.data());
    const MatmulJob qkv[] = {
        {l.wq, qg_.data(), 2 * dq}, {l.wk, k_new_.data(), dkv}, {l.wv, v_new_.data(), dkv}};
    matmul_multi(qkv, h_.data(), hp_.n_embd, ntok, *pool_, mm_);
    for (int t = 0; t < ntok; ++t) {
        for (int h = 0; h < hp_.n_head; ++h) {
            const float* r = qg_.data() + t * 2 * dq + h * 2 * hd;
            std::memcpy(q_.data() + t * dq + h * hd, r, sizeof(float) * hd);
            std::memcpy(gate_.data() + t * dq + h * hd, r + hd, sizeof(float) * hd);
        }
    }
    gate_on_ = true;
}

void ForwardPass::qk_norm(const LayerWeights& l) {
    const int hd = hp_.head_dim, nh = hp_.n_head, nkv = hp_.n_head_kv;
    const float eps = hp_.rms_eps;
    float* q = q_.data();
    float* k = k_new_.data();
    over_items(*pool_, n_rows_, hp_.n_embd_q() + hp_.n_embd_kv(), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            float* qt = q + t * nh * hd;
            float* kt = k + t * nkv * hd;
            for (int h = 0; h < nh; ++h) rms_norm(qt + h * hd, l.q_norm, hd, eps, qt + h * hd);
            for (int h = 0; h < nkv; ++h) rms_norm(kt + h * hd, l.k_norm, hd, eps, kt + h * hd);
        }
    });
}

void ForwardPass::rope_and_cache() {
    const int64_t dq = hp_.n_embd_q(), dkv = hp_.n_embd_kv();
    float* kc = k_new_.data();
    float* vc = v_new_.data();
    const bool swa = swa_rope_ && hp_.is_swa(il_);  // its own angles (gemma3)
    const RopeParams& rp = swa ? rope_swa_ : rope_;
    const float* angles = swa ? rope_cs_swa_.data() : rope_cs_.data();
    for (size_t s = 0; s < segs_.size(); ++s) {
        KVCache& kv = kv_of(s);
        const int pos0 = kv.n_past();
        for (int t = off_[s]; t < off_[s] + n_[s]; ++t) {
            const float* cs = angles + static_cast<size_t>(t) * hp_.n_rot;
            rope_apply(rp, cs, q_.data() + t * dq, hp_.n_head, hp_.head_dim);
            rope_apply(rp, cs, kc + t * dkv, hp_.n_head_kv, hp_.head_dim);
            // Every K/V row enters the cache through write() (the cache decides its storage).
            kv.write(kv_layer(), pos0 + t - off_[s], kc + t * dkv, vc + t * dkv);
        }
    }
}

void ForwardPass::scale_q(float scale) {
    const int64_t n = static_cast<int64_t>(n_rows_) * hp_.n_embd_q();
    float* q = q_.data();
    for (int64_t i = 0; i < n; ++i) q[i] *= scale;
}

// ik_llama.cpp computes each row's factor in float, as here.
void ForwardPass::temper_q() {
    const int64_t dq = hp_.n_embd_q();
    const float floor_scale = static_cast<float>(hp_.attn_temp_floor);
    for (size_t s = 0; s < segs_.size(); ++s) {
        const int pos0 = segs_[s].seq->kv.n_past();
        for (int t = off_[s]; t < off_[s] + n_[s]; ++t) {
            const float pos = static_cast<float>(pos0 + t - off_[s]);
            const float f =
                std::log(std::floor((pos + 1.0f) / floor_scale) + 1.0f) * hp_.attn_temp_scale +
                1.0f;
            float* q = q_.data() + t * dq;
            for (int64_t i = 0; i < dq; ++i) q[i] *= f;
        }
    }
}

void ForwardPass::attention_output(const LayerWeights& l) {
    ThreadPool& pool = *pool_;
    const int64_t dq = hp_.n_embd_q();
    AttentionShape shape = att_shape_;
    shape.window = hp_.window(il_);
    shape.sinks = l.attn_sinks;
    for (size_t s = 0; s < segs_.size(); ++s) {
        const KVCache& kv = kv_of(s);
        const int r0 = last_ ? n_[s] - n_out_[s] : 0;  // first row of the segment to finish
        const int n = n_[s] - r0;
        const int dst = last_ ? out_off_[s] : off_[s];
        if (n == 0) continue;
        attention(kv, kv_layer(), kv.n_past() + r0, n, q_.data() + (off_[s] + r0) * dq,
                  att_.data() + dst * dq, shape, pool, scores_.data());
        if (gate_on_) {  // qwen35: out *= sigmoid(gate) (the gate of the row's own position)
            const float* g = gate_.data() + (off_[s] + r0) * dq;
            float* a = att_.data() + dst * dq;
            for (int64_t i = 0; i < n * dq; ++i) a[i] *= 1.0f / (1.0f + std::exp(-g[i]));
        }
        if (last_ && dst != off_[s] + r0) {
            std::memmove(x_.data() + static_cast<size_t>(dst) * hp_.n_embd,
                         x_.data() + static_cast<size_t>(off_[s] + r0) * hp_.n_embd,
                         sizeof(float) * n * hp_.n_embd);
        }
    }
    gate_on_ = false;
    const int nr = rows_;
    matmul(l.wo, att_.data(), dq, nr, tmp_.data(), hp_.n_embd, pool, mm_);
    add_bias(tmp_.data(), l.bo, nr, hp_.n_embd, hp_.n_embd);
    if (l.attn_post_norm) norm_rows(tmp_.data(), l.attn_post_norm, nr, tmp_.data());
    add_into_all(pool, x_.data(), tmp_.data(), static_cast<int64_t>(nr) * hp_.n_embd);
}

void ForwardPass::ffn(const LayerWeights& l) {
    ThreadPool& pool = *pool_;
    const int nrows = rows_;
    norm_rows(x_.data(), l.ffn_norm, nrows, h_.data());
    if (hp_.n_expert > 0) {
        moe_.forward(l, hp_, h_.data(), nrows, tmp_.data(), pool, mm_);
        if (l.ffn_up_shexp.data) shared_expert(l, nrows);
    } else {
        const MatmulJob gate_up[] = {{l.ffn_gate, ff_g_.data(), hp_.n_ff},
                                     {l.ffn_up, ff_u_.data(), hp_.n_ff}};
        matmul_multi(gate_up, h_.data(), hp_.n_embd, nrows, pool, mm_);
        const int64_t n = static_cast<int64_t>(nrows) * hp_.n_ff;
        if (hp_.ffn_act == HParams::FfnAct::GeluTanh)
            gelu_mul_all(pool, ff_g_.data(), ff_u_.data(), n);
        else
            silu_mul_all(pool, ff_g_.data(), ff_u_.data(), n);
        matmul(l.ffn_down, ff_g_.data(), hp_.n_ff, nrows, tmp_.data(), hp_.n_embd, pool, mm_);
    }
    if (l.ffn_post_norm) norm_rows(tmp_.data(), l.ffn_post_norm, nrows, tmp_.data());
    add_into_all(pool, x_.data(), tmp_.data(), static_cast<int64_t>(nrows) * hp_.n_embd);
}

// tmp += down(silu(gate h) * up h) * sigmoid(gate_inp_shexp . h), h the normed rows in h_.
void ForwardPass::shared_expert(const LayerWeights& l, int nrows) {
    ThreadPool& pool = *pool_;
    const int64_t nff = hp_.n_ff_shexp, d = hp_.n_embd;
    const MatmulJob gate_up[] = {{l.ffn_gate_shexp, sh_g_.data(), nff},
                                 {l.ffn_up_shexp, sh_u_.data(), nff}};
    matmul_multi(gate_up, h_.data(), d, nrows, pool, mm_);
    silu_mul_all(pool, sh_g_.data(), sh_u_.data(), int64_t(nrows) * nff);
    matmul(l.ffn_down_shexp, sh_g_.data(), nff, nrows, sh_d_.data(), d, pool, mm_);
    for (int t = 0; t < nrows; ++t) {
        const float* h = h_.data() + t * d;
        float dot = 0.0f;
        for (int64_t i = 0; i < d; ++i) dot += l.ffn_gate_inp_shexp[i] * h[i];
        const float s = 1.0f / (1.0f + std::exp(-dot));
        float* y = tmp_.data() + t * d;
        const float* sd = sh_d_.data() + t * d;
        for (int64_t i = 0; i < d; ++i) y[i] += sd[i] * s;
    }
}

void ForwardPass::ffn_fused(const LayerWeights& l) {
    ThreadPool& pool = *pool_;
    const int nrows = rows_;
    const int64_t nff = hp_.n_ff, w = ff_width_;
    norm_rows(x_.data(), l.ffn_norm, nrows, h_.data());
    matmul(l.ffn_gate_up, h_.data(), hp_.n_embd, nrows, ff_g_.data(), w, pool, mm_);
    over_items(pool, nrows, w, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            silu_mul(ff_g_.data() + t * w, ff_g_.data() + t * w + nff, nff);
    });
    matmul(l.ffn_down, ff_g_.data(), w, nrows, tmp_.data(), hp_.n_embd, pool, mm_);
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
    // One segment's logits go straight to its session: the pass's own buffer holds only the
    // output rows of a pass over several.
    reserve(n_rows_, ns > 1 ? n_out_rows_ : 0, max_ctx, pool.size());
    const WeightView& e = model_.tok_embd;
    for (size_t s = 0; s < ns; ++s) {
        const int pos0 = segs[s].seq->kv.n_past();
        RopeParams rope = rope_;
        rope.freq_factors = rope_factors(segs[s].seq->kv.n_ctx());
        RopeParams rope_swa = rope_swa_;
        rope_swa.freq_factors = rope.freq_factors;
        for (int t = 0; t < n_[s]; ++t) {
            const size_t row = static_cast<size_t>(off_[s] + t);
            float* xr = x_.data() + row * hp_.n_embd;
            dequantize_row(e.type, e.row(segs[s].tokens[t]), xr, e.cols);
            if (hp_.embd_scale > 0)
                for (int i = 0; i < hp_.n_embd; ++i) xr[i] *= hp_.embd_scale;
            rope_angles(rope, pos0 + t, rope_cs_.data() + row * hp_.n_rot);
            if (swa_rope_) rope_angles(rope_swa, pos0 + t, rope_cs_swa_.data() + row * hp_.n_rot);
        }
    }
    // A session with a device offload runs alone (BatchEvaluator evaluates such sessions one by
    // one): the device runs the first layers (and maybe the head) on x.
    int il0 = 0;
    if (LayerOffload* off = ns == 1 ? segs[0].seq->offload.get() : nullptr) {
        Session::Impl& seq = *segs[0].seq;
        il0 = off->n_layers();
        const float* cs_swa = swa_rope_ ? rope_cs_swa_.data() : nullptr;
        if (off->has_output()) {
            grow(seq.logits, static_cast<size_t>(n_out_[0]) * hp_.n_vocab);
            off->forward(x_.data(), rope_cs_.data(), cs_swa, n_rows_, seq.kv.n_past(), n_out_[0],
                         seq.logits.data(), pool);
            seq.n_logits = n_out_[0];
            seq.kv.append(segs[0].tokens);
            return;
        }
        off->forward(x_.data(), rope_cs_.data(), cs_swa, n_rows_, seq.kv.n_past(), n_out_[0],
                     logits_.data(), pool);
    }
    for (size_t s = 0; s < ns; ++s) {
        Session::Impl& seq = *segs[s].seq;
        if (!seq.rec.empty()) seq.rec.begin_pass(seq.kv.n_past(), n_[s]);
    }
    // Only the rows whose logits are wanted go through the last layer's attention output and
    // FFN, the final norm and the output matmul (earlier layers feed every token's K and V).
    segs_ = segs;
    pool_ = &pool;
    const ArchSpec& arch = model_.arch();
    for (il_ = il0; il_ < hp_.n_layer; ++il_) {
        last_ = il_ == hp_.n_layer - 1;
        rows_ = last_ ? n_out_rows_ : n_rows_;
        arch.block(*this, model_.layers[il_]);
    }
    norm_rows(x_.data(), model_.output_norm, n_out_rows_, h_.data());
    // The MTP head's input: the final hidden rows after the output norm (the output matmul's
    // input, as ik_llama.cpp and vLLM feed it), one per logits row.
    if (model_.has_mtp()) {
        const size_t d = static_cast<size_t>(hp_.n_embd);
        for (size_t s = 0; s < ns; ++s) {
            Session::Impl& seq = *segs[s].seq;
            const size_t row0 = static_cast<size_t>(segs[s].logits_row);
            grow(seq.hidden, (row0 + n_out_[s]) * d);
            std::memcpy(seq.hidden.data() + row0 * d, h_.data() + out_off_[s] * d,
                        sizeof(float) * n_out_[s] * d);
        }
    }
    const size_t nv = static_cast<size_t>(hp_.n_vocab);
    // One segment (a plain or verify step): the output matmul writes straight into its logits
    // (a 9-row pass over a 128k vocabulary would otherwise copy 4.6 MB); several: into the
    // pass's buffer, then each segment's rows to its session.
    float* out = logits_.data();
    if (ns == 1) {
        Session::Impl& seq = *segs[0].seq;
        const size_t row0 = static_cast<size_t>(segs[0].logits_row);
        grow(seq.logits, (row0 + n_out_[0]) * nv);
        out = seq.logits.data() + row0 * nv;
    }
    matmul(model_.output, h_.data(), hp_.n_embd, n_out_rows_, out, hp_.n_vocab, pool, mm_);
    if (hp_.final_softcap > 0) {
        over_items(pool, n_out_rows_, hp_.n_vocab, [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; ++t) softcap(out + t * nv, hp_.n_vocab, hp_.final_softcap);
        });
    }
    for (size_t s = 0; s < ns; ++s) {
        Session::Impl& seq = *segs[s].seq;
        const size_t row0 = static_cast<size_t>(segs[s].logits_row);
        if (ns > 1) {
            grow(seq.logits, (row0 + n_out_[s]) * nv);
            std::memcpy(seq.logits.data() + row0 * nv, logits_.data() + out_off_[s] * nv,
                        sizeof(float) * n_out_[s] * nv);
        }
        seq.n_logits = int(row0) + n_out_[s];
        seq.kv.append(segs[s].tokens);
    }
}

}  // namespace specula
