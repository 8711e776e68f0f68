// The Gated DeltaNet recurrence (see delta_net.h).
#include "model/state/delta_net.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"

namespace specula {

namespace {

constexpr int kMaxHeadDim = 512;  // model/arch/qwen35.cpp refuses wider heads

// As ggml_l2_norm: squares summed in double, x / max(|x|, eps).
void l2_norm(float* x, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += double(x[i] * x[i]);
    const float scale = 1.0f / std::max(std::sqrt(float(sum)), eps);
    for (int i = 0; i < n; ++i) x[i] *= scale;
}

// The short causal conv of positions [0, n) for channels [c0, c1) and their new state, then
// silu, then the L2 norms of the key heads of q and k among them (c0 and c1 are head
// boundaries). c: n rows of conv_dim. Every channel is computed alone, so any split of the
// channels gives the same bits.
void conv_rows(const DeltaNetShape& s, const float* w, const float* st_in, float* st_out,
               const float* x, int n, float* c, int c0, int c1) {
    const int K = s.d_conv, C = s.conv_dim, K1 = K - 1;
    for (int t = 0; t < n; ++t) {
        float* ct = c + size_t(t) * C;
        for (int ch = c0; ch < c1; ++ch) {
            const float* wc = w + size_t(ch) * K;
            const float* sc = st_in + size_t(ch) * K1;
            float sum = 0.0f;
            for (int j = 0; j < K; ++j) {
                const int r = t - K1 + j;  // position of tap j, relative to the first of the run
                const float v = r < 0 ? sc[K1 + r] : x[size_t(r) * C + ch];
                sum += v * wc[j];
            }
            ct[ch] = sum;
        }
        // silu through the kernel table's vectorised silu_mul (times ones: exact).
        static const std::array<float, 256> ones = [] {
            std::array<float, 256> a;
            a.fill(1.0f);
            return a;
        }();
        for (int ch = c0; ch < c1; ch += 256)
            silu_mul(ct + ch, ones.data(), std::min(256, c1 - ch));
        for (int h = c0 / s.head_dim; h < std::min(c1 / s.head_dim, 2 * s.n_k_heads); ++h)
            l2_norm(ct + h * s.head_dim, s.head_dim, s.eps);
    }
    for (int ch = c0; ch < c1; ++ch) {
        const float* sc = st_in + size_t(ch) * K1;
        float* so = st_out + size_t(ch) * K1;
        for (int j = 0; j < K1; ++j) {
            const int r = n - K1 + j;
            so[j] = r < 0 ? sc[K1 + r] : x[size_t(r) * C + ch];
        }
    }
}

// Value head h over positions [0, n): S (its hd x hd state, updated in place). The row loops
// vectorise; built for AVX-512 and AVX2 + FMA as well as the baseline, one chosen at load by the
// CPU (GCC's target_clones): the pass and a rollback's replay run the same clone, so they agree
// to the bit.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void rule_head(const DeltaNetShape& s, int h, const float* S_in, float* S, const float* c,
               const float* g, const float* beta_raw, int n, float* out) {
    // The first position reads the state from S_in, the later ones from S (no copy first).
    const float* Sr = S_in;
    const int hd = s.head_dim, C = s.conv_dim, kh = h % s.n_k_heads;
    const float scale = 1.0f / std::sqrt(float(hd));
    float vp[kMaxHeadDim], ov[kMaxHeadDim], vn[kMaxHeadDim];
    auto q_of = [&](int t) { return c + size_t(t) * C + kh * hd; };
    auto k_of = [&](int t) { return c + size_t(t) * C + s.key_dim() + kh * hd; };
    // S k and S q of the first position; each update below computes the next position's while
    // it writes S (one sweep over the state a position, the sums in the same column order).
    if (n > 0) {
        for (int r = 0; r < hd; ++r) vp[r] = ov[r] = 0.0f;
        const float *k = k_of(0), *q = q_of(0);
        for (int col = 0; col < hd; ++col) {
            const float* Sc = Sr + size_t(col) * hd;
            const float kc = k[col], qc = q[col];
            for (int r = 0; r < hd; ++r) {
                vp[r] += Sc[r] * kc;
                ov[r] += Sc[r] * qc;
            }
        }
    }
    for (int t = 0; t < n; ++t) {
        const float* q = q_of(t);
        const float* k = k_of(t);
        const float* v = c + size_t(t) * C + 2 * s.key_dim() + h * hd;
        float qq = 0.0f, kk = 0.0f;
        for (int i = 0; i < hd; ++i) {
            qq += q[i] * q[i];
            kk += k[i] * k[i];
        }
        const float q_inv = 1.0f / std::sqrt(qq + 1e-12f);
        const float k_inv = 1.0f / std::sqrt(kk + 1e-12f);
        const float beta = 1.0f / (1.0f + std::exp(-beta_raw[size_t(t) * s.n_v_heads + h]));
        const float decay = std::exp(std::min(g[size_t(t) * s.n_v_heads + h], 50.0f));
        for (int r = 0; r < hd; ++r) vn[r] = v[r] * beta - vp[r] * beta * decay * k_inv;
        if (out) {
            float attn = 0.0f;
            for (int i = 0; i < hd; ++i) attn += (k[i] * k_inv) * (q[i] * q_inv * scale);
            float* o = out + size_t(t) * s.value_dim() + size_t(h) * hd;
            for (int r = 0; r < hd; ++r) o[r] = ov[r] * decay * q_inv * scale + vn[r] * attn;
        }
        if (t + 1 < n) {
            const float *k2 = k_of(t + 1), *q2 = q_of(t + 1);
            for (int r = 0; r < hd; ++r) vp[r] = ov[r] = 0.0f;
            for (int col = 0; col < hd; ++col) {
                const float* Sc = Sr + size_t(col) * hd;
                float* So = S + size_t(col) * hd;
                const float kc = k[col] * k_inv, k2c = k2[col], q2c = q2[col];
                for (int r = 0; r < hd; ++r) {
                    const float v2 = decay * Sc[r] + vn[r] * kc;
                    const float sn = v2 < -1e6f ? -1e6f : (v2 > 1e6f ? 1e6f : v2);
                    So[r] = sn;
                    vp[r] += sn * k2c;
                    ov[r] += sn * q2c;
                }
            }
        } else {
            for (int col = 0; col < hd; ++col) {
                const float* Sc = Sr + size_t(col) * hd;
                float* So = S + size_t(col) * hd;
                const float kc = k[col] * k_inv;
                for (int r = 0; r < hd; ++r) {
                    const float v2 = decay * Sc[r] + vn[r] * kc;
                    So[r] = v2 < -1e6f ? -1e6f : (v2 > 1e6f ? 1e6f : v2);
                }
            }
        }
        Sr = S;
    }
    if (n == 0 && S != S_in) std::memcpy(S, S_in, sizeof(float) * size_t(hd) * hd);
}

}  // namespace

void delta_net_gate(const float* alpha, const float* dt, const float* a, int n, int n_v, float* g) {
    for (int t = 0; t < n; ++t) {
        for (int h = 0; h < n_v; ++h) {
            const float z = alpha[size_t(t) * n_v + h] + dt[h];
            const float sp = z > 20.0f ? z : std::log(1.0f + std::exp(z));
            g[size_t(t) * n_v + h] = sp * a[h];
        }
    }
}

void delta_net_run(const DeltaNetShape& s, const float* conv_w, const float* conv_in,
                   float* conv_out, const float* ssm_in, float* ssm_out, const float* x,
                   const float* g, const float* beta_raw, int n, float* out, float* scratch,
                   ThreadPool& pool) {
    // The conv by groups of head_dim channels (a key, query or value head each).
    const int n_groups = s.conv_dim / s.head_dim;
    const auto groups = [&](int64_t b, int64_t e) {
        conv_rows(s, conv_w, conv_in, conv_out, x, n, scratch, int(b) * s.head_dim,
                  int(e) * s.head_dim);
    };
    // (one position's conv is too small to be worth a second dispatch of the pool)
    if (pool.size() == 1 || n < 4)
        groups(0, n_groups);
    else
        pool.parallel_for(n_groups, groups);
    const size_t hh = size_t(s.head_dim) * s.head_dim;
    const auto heads = [&](int64_t b, int64_t e) {
        for (int64_t h = b; h < e; ++h)
            rule_head(s, int(h), ssm_in + size_t(h) * hh, ssm_out + size_t(h) * hh, scratch, g,
                      beta_raw, n, out);
    };
    // Each head is one thread's from start to end, so the split changes no bit.
    if (pool.size() == 1 || int64_t(n) * s.n_v_heads * int64_t(hh) < (1 << 15))
        heads(0, s.n_v_heads);
    else
        pool.parallel_for(s.n_v_heads, heads);
}

}  // namespace specula
