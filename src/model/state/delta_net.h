// The recurrence of a Gated DeltaNet layer (qwen35's linear attention), as ik_llama.cpp's CPU ops
// compute it (ggml_ssm_conv, ggml_l2_norm, ggml_delta_net), for the positions of one sequence:
//   c_t   = silu(sum_j conv_w[c][j] * window_t[c][j])  over the d_conv newest raw inputs of channel
//           c (the d_conv - 1 before t from the conv state, then x_t); channels are [q | k | v]
//   q, k  = each key head of c_t L2-normalised (eps = rms_eps), then again (eps 1e-12) inside
//           the rule, as the reference does; value head h reads key head h % n_k_heads
//   per value head, with decay = exp(min(g, 50)), beta = sigmoid(beta_raw):
//     v_new = beta (v - decay S k)            S: [head_dim x head_dim] F32, S[row + col hd]
//     out   = (decay S q + v_new (k . q)) / sqrt(head_dim)
//     S     = clamp(decay S + v_new k^T, +-1e6)
// The conv state keeps the d_conv - 1 newest raw inputs per channel. Every position goes through
// the same operations in the same order however the positions are split into calls, so a state
// replayed from stored inputs (model/state/recurrent_state.h) is bit-identical to the one the pass
// made.
#pragma once

#include "common/threadpool.h"

namespace specula {

struct DeltaNetShape {
    int d_conv = 0;     // conv taps
    int conv_dim = 0;   // channels: 2 key_dim + value_dim
    int n_k_heads = 0;  // key heads (ssm.group_count)
    int n_v_heads = 0;  // value heads (ssm.time_step_rank)
    int head_dim = 0;   // both key and value heads (ssm.state_size)
    float eps = 1e-6f;  // the L2 norm's
    int key_dim() const { return n_k_heads * head_dim; }
    int value_dim() const { return n_v_heads * head_dim; }
    int conv_state() const { return (d_conv - 1) * conv_dim; }  // floats
    int ssm_state() const { return n_v_heads * head_dim * head_dim; }
};

// Runs n positions. conv_in / ssm_in: the state before them; conv_out / ssm_out: after (either
// may alias its input: the update in place is the state without a snapshot). x: n rows of conv_dim
// raw inputs; g: n rows of n_v_heads log-decays; beta_raw: n rows of n_v_heads. out: n rows of
// value_dim outputs, or null (only the state). scratch: n * conv_dim floats.
void delta_net_run(const DeltaNetShape& s, const float* conv_w, const float* conv_in,
                   float* conv_out, const float* ssm_in, float* ssm_out, const float* x,
                   const float* g, const float* beta_raw, int n, float* out, float* scratch,
                   ThreadPool& pool);

// g = softplus(alpha + dt) * a for n rows of n_v values (softplus(x) = x above 20).
void delta_net_gate(const float* alpha, const float* dt, const float* a, int n, int n_v, float* g);

}  // namespace specula
