// The Mamba-2 recurrence (see mamba2.h).
#include "model/state/mamba2.h"

#include <cmath>
#include <cstring>

namespace specula {

namespace {

// The causal conv of positions [0, n) for channels [c0, c1), its bias and silu, into c (n rows
// of conv_dim), and those channels' new conv state. Each channel is computed alone: any split of
// the channels gives the same bits.
void conv_rows(const Mamba2Shape& s, const Mamba2Weights& w, const float* st_in, float* st_out,
               const float* x, int n, float* c, int c0, int c1) {
    const int K = s.d_conv, C = s.conv_dim(), K1 = K - 1;
    for (int t = 0; t < n; ++t) {
        float* ct = c + size_t(t) * C;
        for (int ch = c0; ch < c1; ++ch) {
            const float* wc = w.conv_w + size_t(ch) * K;
            const float* sc = st_in + size_t(ch) * K1;
            float sum = 0.0f;
            for (int j = 0; j < K; ++j) {
                const int r = t - K1 + j;  // position of tap j, relative to the first of the run
                sum += (r < 0 ? sc[K1 + r] : x[size_t(r) * C + ch]) * wc[j];
            }
            if (w.conv_b) sum += w.conv_b[ch];
            ct[ch] = sum / (1.0f + std::exp(-sum));
        }
    }
    for (int ch = c0; ch < c1; ++ch) {
        const float* sc = st_in + size_t(ch) * K1;
        float* so = st_out + size_t(ch) * K1;
        float tmp[64];  // d_conv <= 64 (model/arch/nemotron_h.cpp): st_in may alias st_out
        for (int j = 0; j < K1; ++j) {
            const int r = n - K1 + j;
            tmp[j] = r < 0 ? sc[K1 + r] : x[size_t(r) * C + ch];
        }
        std::memcpy(so, tmp, sizeof(float) * size_t(K1));
    }
}

// Head h over positions [0, n): its state S (head_dim x d_state) from S_in into S. The state's
// rows are swept in 8 lanes with their own partial sums of S C (added in a fixed order), which
// vectorises without reassociating anything; built for AVX-512 and AVX2 + FMA as well as the
// baseline, one chosen at load by the CPU (GCC's target_clones): the pass and a rollback's
// replay run the same clone, so they agree to the bit.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void scan_head(const Mamba2Shape& s, const Mamba2Weights& w, int h, const float* S_in, float* S,
               const float* c, const float* dt, int n, float* y) {
    const int hd = s.head_dim(), ds = s.d_state, C = s.conv_dim();
    const int g = h / (s.n_head / s.n_group);
    const float* Sr = S_in;  // the first position reads S_in, the later ones S
    for (int t = 0; t < n; ++t) {
        const float* ct = c + size_t(t) * C;
        const float* xh = ct + size_t(h) * hd;
        const float* B = ct + s.d_inner + size_t(g) * ds;
        const float* Cm = ct + s.d_inner + size_t(s.n_group) * ds + size_t(g) * ds;
        const float raw = dt[size_t(t) * s.n_head + h];
        const float dtp = raw > 20.0f ? raw : std::log1p(std::exp(raw));
        const float dA = std::exp(dtp * w.a[h]);
        for (int p = 0; p < hd; ++p) {
            const float xdt = xh[p] * dtp;
            const float* sr = Sr + size_t(p) * ds;
            float* so = S + size_t(p) * ds;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int k = 0;
            for (; k + 8 <= ds; k += 8) {
                for (int j = 0; j < 8; ++j) {
                    const float v = sr[k + j] * dA + B[k + j] * xdt;
                    acc[j] += v * Cm[k + j];
                    so[k + j] = v;
                }
            }
            float sum =
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            for (; k < ds; ++k) {
                const float v = sr[k] * dA + B[k] * xdt;
                sum += v * Cm[k];
                so[k] = v;
            }
            if (y) y[size_t(t) * s.d_inner + size_t(h) * hd + p] = sum + xh[p] * w.d[h];
        }
        Sr = S;
    }
    if (n == 0 && S != S_in) std::memcpy(S, S_in, sizeof(float) * size_t(hd) * ds);
}

}  // namespace

Mamba2Shape mamba2_shape(const HParams& hp) {
    Mamba2Shape s;
    s.d_conv = hp.ssm_d_conv;
    s.d_inner = hp.ssm_d_inner;
    s.n_group = hp.ssm_n_group;
    s.d_state = hp.ssm_d_state;
    s.n_head = hp.ssm_dt_rank;
    return s;
}

void mamba2_run(const Mamba2Shape& s, const Mamba2Weights& w, const float* conv_in, float* conv_out,
                const float* ssm_in, float* ssm_out, const float* x, const float* dt, int n,
                float* y, float* scratch, ThreadPool& pool) {
    const int C = s.conv_dim();
    const auto chans = [&](int64_t b, int64_t e) {
        conv_rows(s, w, conv_in, conv_out, x, n, scratch, int(b), int(e));
    };
    // (a few positions' conv is too small to be worth a dispatch of the pool)
    if (pool.size() == 1 || int64_t(n) * C < (1 << 14))
        chans(0, C);
    else
        pool.parallel_for(C, chans);
    const size_t per_head = size_t(s.head_dim()) * s.d_state;
    const auto heads = [&](int64_t b, int64_t e) {
        for (int64_t h = b; h < e; ++h)
            scan_head(s, w, int(h), ssm_in + size_t(h) * per_head, ssm_out + size_t(h) * per_head,
                      scratch, dt, n, y);
    };
    // Each head is one thread's from start to end, so the split changes no bit.
    if (pool.size() == 1 || int64_t(n) * s.ssm_state() < (1 << 15))
        heads(0, s.n_head);
    else
        pool.parallel_for(s.n_head, heads);
}

}  // namespace specula
