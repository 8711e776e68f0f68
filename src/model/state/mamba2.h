// The recurrence of a Mamba-2 mixer (nemotron_h's SSM layers), as llama.cpp's CPU ops compute it
// (ggml_ssm_conv, the bias, silu, ggml_ssm_scan with a scalar A per head), for the positions of
// one sequence:
//   c_t = silu(sum_j conv_w[ch][j] * window_t[ch][j] + conv_b[ch]) over the d_conv newest raw
//         inputs of channel ch (the d_conv - 1 before t from the conv state, then xBC_t);
//         channels are [x (d_inner) | B (n_group x d_state) | C (n_group x d_state)]
//   per head h (head_dim = d_inner / n_head channels of x, group g = h / (n_head / n_group)):
//     dt  = softplus(dt_t[h])       (dt_t already holds the dt bias; softplus(x) = x above 20)
//     S   = exp(dt A[h]) S + dt x_h B_g^T       S: [head_dim x d_state] F32, S[p d_state + n]
//     y_h = S C_g + D[h] x_h
// The conv state keeps the d_conv - 1 newest raw inputs per channel. Every position goes through
// the same operations in the same order however the positions are split into calls (each head
// and each channel is one thread's), so a state replayed from stored inputs
// (model/state/recurrent_state.h) is bit-identical to the one the pass made.
#pragma once

#include <cstdint>

#include "common/threadpool.h"
#include "model/load/hparams.h"

namespace specula {

struct Mamba2Shape {
    int d_conv = 0;   // conv taps
    int d_inner = 0;  // x's channels (n_head x head_dim)
    int n_group = 0;  // B / C groups
    int d_state = 0;  // state per channel
    int n_head = 0;   // heads (ssm.time_step_rank)
    int head_dim() const { return d_inner / n_head; }
    int conv_dim() const { return d_inner + 2 * n_group * d_state; }
    int conv_state() const { return (d_conv - 1) * conv_dim(); }  // floats
    int64_t ssm_state() const { return int64_t(d_inner) * d_state; }
};

// The recurrence's shape for hp (its ssm_* sizes).
Mamba2Shape mamba2_shape(const HParams& hp);

// One layer's recurrent weights: conv taps [conv_dim][d_conv], conv bias [conv_dim] (null: none),
// A [n_head] (negative), D [n_head].
struct Mamba2Weights {
    const float *conv_w = nullptr, *conv_b = nullptr, *a = nullptr, *d = nullptr;
};

// Runs n positions. conv_in / ssm_in: the state before them; conv_out / ssm_out: after (either
// may alias its input). x: n rows of conv_dim raw conv inputs; dt: n rows of n_head (with the
// bias). y: n rows of d_inner outputs (the scan plus D x), or null (only the state). scratch:
// n * conv_dim floats.
void mamba2_run(const Mamba2Shape& s, const Mamba2Weights& w, const float* conv_in, float* conv_out,
                const float* ssm_in, float* ssm_out, const float* x, const float* dt, int n,
                float* y, float* scratch, ThreadPool& pool);

}  // namespace specula
