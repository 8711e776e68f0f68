// Mixture-of-experts FFN (see moe.h).
#include "model/blocks/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "kernels/repack.h"

namespace specula {

namespace {

// Expert e of a stacked expert tensor.
WeightView expert_view(const WeightView& w, int e, int n_expert) {
    return stack_slice(w, e, n_expert);
}

// Expert e's gate (half 0) or up (half 1) rows of a fused [gate | up] stacked expert tensor (a
// packed one's halves are whole tiles: model/load/pack.cpp packs it only then).
WeightView fused_half(const WeightView& w, int e, int n_expert, int half) {
    return stack_slice(expert_view(w, e, n_expert), half, 2);
}

template <class T>
void grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

// The index of the highest of s[i] over i in [0, n) not in taken[0, nt),
// ties to the lower index; -1 when none.
int best_of(const float* s, int n, const int* taken, int nt) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
        if (std::find(taken, taken + nt, i) != taken + nt) continue;
        if (best < 0 || s[i] > s[best]) best = i;
    }
    return best;
}

// The k experts of one token (most preferred first) by their probabilities p plus the selection
// bias b (where given; the weights stay p's). With expert groups, only the experts of the
// n_group_used groups whose two best scores sum highest compete.
void select_experts(const HParams& hp, const float* p, const float* b, float* score, int* sel) {
    const int ne = hp.n_expert, k = hp.n_expert_used;
    for (int e = 0; e < ne; ++e) score[e] = b ? p[e] + b[e] : p[e];
    const int ng = hp.n_expert_groups;
    if (ng > 1 && hp.n_group_used < ng) {
        const int per = ne / ng;
        float gs[64];  // HParams caps the groups at 64
        int top2[2], keep[64];
        for (int g = 0; g < ng; ++g) {
            const float* sg = score + g * per;
            top2[0] = best_of(sg, per, top2, 0);
            top2[1] = per > 1 ? best_of(sg, per, top2, 1) : -1;
            gs[g] = sg[top2[0]] + (top2[1] >= 0 ? sg[top2[1]] : 0.0f);
        }
        for (int r = 0; r < hp.n_group_used; ++r) keep[r] = best_of(gs, ng, keep, r);
        for (int g = 0; g < ng; ++g) {
            if (std::find(keep, keep + hp.n_group_used, g) != keep + hp.n_group_used) continue;
            for (int e = g * per; e < (g + 1) * per; ++e) score[e] = -INFINITY;
        }
    }
    // Top-k by score, ties to the lower expert id (k and ne are tiny).
    for (int r = 0; r < k; ++r) sel[r] = best_of(score, ne, sel, r);
}

}  // namespace

// f(buffer, elements) for each buffer, sized for ntok tokens (4-byte elements all).
template <class M, class F>
void each_moe_buffer(M& m, const HParams& hp, int ntok, F&& f) {
    const size_t n = static_cast<size_t>(ntok), k = hp.n_expert_used;
    f(m.logits_, n * hp.n_expert);
    f(m.sel_, n * k);
    f(m.w_, n * k);
    f(m.slots_, n * k);
    f(m.xg_, n * hp.n_embd);
    f(m.g_, std::max(n, k) * hp.n_ff_expert);  // a one-token pass: one row per chosen expert
    f(m.u_, std::max(n, k) * hp.n_ff_expert);
    f(m.d_, n * hp.n_embd);
    f(m.eo_, n * k * hp.n_embd);
    f(m.score_, static_cast<size_t>(hp.n_expert));
}

void MoeFFN::reserve(const HParams& hp, int ntok) {
    each_moe_buffer(*this, hp, ntok, [](auto& v, size_t n) { grow(v, n); });
    jobs_.reserve(2 * static_cast<size_t>(hp.n_expert_used));  // run_one_token's
}

double MoeFFN::bytes(const HParams& hp, int ntok) {
    MoeFFN none;
    double b = 0;
    each_moe_buffer(none, hp, ntok, [&](auto&, size_t n) { b += 4.0 * double(n); });
    return b;
}

double MoeFFN::allocated_bytes() const {
    double b = 0;
    each_moe_buffer(*this, HParams{}, 0, [&](auto& v, size_t) { b += 4.0 * double(v.capacity()); });
    return b;
}

void MoeFFN::route(const LayerWeights& l, const HParams& hp, const float* x, int ntok,
                   ThreadPool& pool, MatmulScratch& scratch) {
    const int ne = hp.n_expert, k = hp.n_expert_used;
    WeightView router{GGMLType::F32, ne, hp.n_embd,
                      reinterpret_cast<const uint8_t*>(l.ffn_gate_inp)};
    matmul(router, x, hp.n_embd, ntok, logits_.data(), ne, pool, scratch);
    const bool topk_softmax = hp.moe_routing == HParams::MoeRouting::TopKSoftmax;
    for (int t = 0; t < ntok; ++t) {
        float* p = logits_.data() + static_cast<size_t>(t) * ne;
        if (l.ffn_gate_inp_b) add_into(p, l.ffn_gate_inp_b, ne);
        if (hp.moe_sigmoid) {
            for (int e = 0; e < ne; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
        } else if (!topk_softmax) {
            softmax(p, ne);
        }
        select_experts(hp, p, l.ffn_exp_probs_b, score_.data(),
                       sel_.data() + static_cast<size_t>(t) * k);
        const int* sel = sel_.data() + static_cast<size_t>(t) * k;
        float* w = w_.data() + static_cast<size_t>(t) * k;
        if (topk_softmax) {  // the chosen logits' softmax (gpt-oss)
            for (int r = 0; r < k; ++r) w[r] = p[sel[r]];
            softmax(w, k);
            continue;
        }
        double sum = 0.0;
        for (int r = 0; r < k; ++r) {
            w[r] = p[sel[r]];
            sum += static_cast<double>(w[r]);
        }
        const float fsum = static_cast<float>(sum);
        if (hp.moe_norm_w)
            for (int r = 0; r < k; ++r) w[r] /= fsum;
        if (hp.moe_w_scale != 1.0f)
            for (int r = 0; r < k; ++r) w[r] *= hp.moe_w_scale;
        if (l.ffn_down_exps_s)
            for (int r = 0; r < k; ++r) w[r] *= l.ffn_down_exps_s[sel[r]];
    }
}

namespace {

// Expert e's gate (half 0) or up (half 1) rows, from the separate stacks or the fused one.
WeightView gate_or_up(const LayerWeights& l, const HParams& hp, int e, int half) {
    if (l.ffn_gate_up_exps.data) return fused_half(l.ffn_gate_up_exps, e, hp.n_expert, half);
    return expert_view(half == 0 ? l.ffn_gate_exps : l.ffn_up_exps, e, hp.n_expert);
}

// g[i] = act(g[i] + gate bias, u[i] + up bias) for n rows of expert e's intermediates.
void activate(const LayerWeights& l, const HParams& hp, int e, float* g0, float* u0, int n) {
    const int ff = hp.n_ff_expert;
    const float* gb = l.ffn_gate_exps_b ? l.ffn_gate_exps_b + static_cast<size_t>(e) * ff : nullptr;
    const float* ub = l.ffn_up_exps_b ? l.ffn_up_exps_b + static_cast<size_t>(e) * ff : nullptr;
    for (int i = 0; i < n; ++i) {
        float* g = g0 + static_cast<size_t>(i) * ff;
        float* u = u0 + static_cast<size_t>(i) * ff;
        if (gb) add_into(g, gb, ff);
        if (ub) add_into(u, ub, ff);
        if (hp.moe_act == HParams::MoeAct::SwigluOai)
            swiglu_oai(g, u, ff);
        else if (hp.moe_act == HParams::MoeAct::Gelu)
            gelu_mul(g, u, ff);
        else
            silu_mul(g, u, ff);
    }
}

// y[i] = down_e(g[i]) + down bias for n rows.
void down(const LayerWeights& l, const HParams& hp, int e, const float* g, int n, float* y,
          ThreadPool& pool, MatmulScratch& scratch) {
    const int ff = hp.n_ff_expert, d = hp.n_embd;
    matmul(expert_view(l.ffn_down_exps, e, hp.n_expert), g, ff, n, y, d, pool, scratch);
    if (!l.ffn_down_exps_b) return;
    const float* db = l.ffn_down_exps_b + static_cast<size_t>(e) * d;
    for (int i = 0; i < n; ++i) add_into(y + static_cast<size_t>(i) * d, db, d);
}

}  // namespace

bool MoeFFN::run_expert(const LayerWeights& l, const HParams& hp, int e, const float* x, int ntok,
                        ThreadPool& pool, MatmulScratch& scratch) {
    const int k = hp.n_expert_used, d = hp.n_embd, ff = hp.n_ff_expert;
    int n = 0;
    for (int i = 0; i < ntok * k; ++i) {
        if (sel_[i] != e) continue;
        slots_[n] = i;
        std::memcpy(xg_.data() + static_cast<size_t>(n) * d, x + static_cast<size_t>(i / k) * d,
                    sizeof(float) * d);
        ++n;
    }
    if (n == 0) return false;
    const MatmulJob gate_up[] = {{gate_or_up(l, hp, e, 0), g_.data(), ff},
                                 {gate_or_up(l, hp, e, 1), u_.data(), ff}};
    matmul_multi(gate_up, xg_.data(), d, n, pool, scratch);
    activate(l, hp, e, g_.data(), u_.data(), n);
    down(l, hp, e, g_.data(), n, d_.data(), pool, scratch);
    for (int i = 0; i < n; ++i) {
        std::memcpy(eo_.data() + static_cast<size_t>(slots_[i]) * d,
                    d_.data() + static_cast<size_t>(i) * d, sizeof(float) * d);
    }
    return true;
}

void MoeFFN::run_one_token(const LayerWeights& l, const HParams& hp, const float* x,
                           ThreadPool& pool, MatmulScratch& scratch) {
    const int k = hp.n_expert_used, ff = hp.n_ff_expert, d = hp.n_embd;
    jobs_.resize(2 * static_cast<size_t>(k));
    for (int r = 0; r < k; ++r) {
        for (int half = 0; half < 2; ++half) {
            float* y = (half == 0 ? g_.data() : u_.data()) + static_cast<size_t>(r) * ff;
            jobs_[2 * static_cast<size_t>(r) + half] = {gate_or_up(l, hp, sel_[r], half), y, ff};
        }
    }
    matmul_multi(jobs_, x, d, 1, pool, scratch);
    for (int r = 0; r < k; ++r) {
        const size_t o = static_cast<size_t>(r) * ff;
        activate(l, hp, sel_[r], g_.data() + o, u_.data() + o, 1);
        down(l, hp, sel_[r], g_.data() + o, 1, eo_.data() + static_cast<size_t>(r) * d, pool,
             scratch);
    }
    experts_run_ = k;
}

void MoeFFN::forward(const LayerWeights& l, const HParams& hp, const float* x, int ntok, float* out,
                     ThreadPool& pool, MatmulScratch& scratch, const float* router_x) {
    reserve(hp, ntok);
    route(l, hp, router_x ? router_x : x, ntok, pool, scratch);
    experts_run_ = 0;
    if (ntok == 1) {
        run_one_token(l, hp, x, pool, scratch);
    } else {
        for (int e = 0; e < hp.n_expert; ++e)
            experts_run_ += run_expert(l, hp, e, x, ntok, pool, scratch);
    }
    const int k = hp.n_expert_used, d = hp.n_embd;
    for (int t = 0; t < ntok; ++t) {
        float* o = out + static_cast<size_t>(t) * d;
        for (int r = 0; r < k; ++r) {
            const float w = w_[static_cast<size_t>(t) * k + r];
            const float* y = eo_.data() + (static_cast<size_t>(t) * k + r) * d;
            for (int i = 0; i < d; ++i) o[i] = r == 0 ? y[i] * w : o[i] + y[i] * w;
        }
    }
}

}  // namespace specula
