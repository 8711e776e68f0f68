// The shared blocks of a layer: free functions over a pass's state (model/blocks/pass_state.h) that
// an architecture's block (ArchSpec::block) calls in order for the current layer (st.il). Each
// follows llama.cpp's / ik_llama.cpp's graph op by op. Steps only one architecture takes live in
// that architecture's file (model/arch/), over the same state.
#pragma once

#include "model/blocks/pass_state.h"
#include "model/load/weights.h"

namespace specula {

// --- Attention (block_attention.cpp) ---
// h = rms_norm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h (+ the biases l has), every row; the
// layer's own widths (HParams::layer_*). A layer that reads another's cache (HParams::kv_src)
// computes q only; one without Wv q and k only (its architecture fills v).
void attention_input(PassState& st, const LayerWeights& l);
// q and k of every row: each head's head_dim values = rms_norm(head) * q_norm / k_norm (between
// attention_input and rope_and_cache).
void qk_norm(PassState& st, const LayerWeights& l);
// Rotates q and k at each row's position (with the sliding-window rope in a sliding-window layer
// that has its own) and writes k, v into each segment's cache (q only, in a layer that reads
// another's cache). The rows are split over the pass's threads when there are enough of them
// (each row's bits as on one thread).
void rope_and_cache(PassState& st);
// Where segment s's attention reads its queries and writes its outputs: rows [src, src + n) of
// q give rows [dst, dst + n) of att (in the last layer only the output rows, moved to the front).
struct AttendedRows {
    int src = 0, dst = 0, n = 0;
};
AttendedRows attended_rows(const PassState& st, size_t s);
// att = attention(q, K, V) of every segment over its own cache, within the layer's window
// (HParams::window), with the layer's sinks; in the last layer, each segment's output rows of x
// move to the front too.
void attend(PassState& st, const LayerWeights& l);
// x += Wo att (+ bo), the output RMS-normed by attn_post_norm first when l has one.
void attention_project(PassState& st, const LayerWeights& l);
// attend then attention_project.
void attention_output(PassState& st, const LayerWeights& l);

// --- Feed-forward (block_ffn.cpp) ---
// x += FFN(rms_norm(x) * ffn_norm): the MoE when the layer has a router (plus the shared expert
// when l has one), else SwiGLU (GeGLU with HParams::FfnAct::GeluTanh); the FFN output RMS-normed
// by ffn_post_norm first when l has one.
void ffn(PassState& st, const LayerWeights& l);
// out = down(act(gate h) * up h) for nrows rows of st.h, the layer's n_ff wide (the dense FFN
// without its norms or residual).
void dense_ffn(PassState& st, const LayerWeights& l, int nrows, float* out);

// --- Gated DeltaNet (block_delta_net.cpp, model/state/delta_net.h) ---
// A whole linear-attention layer over every segment's recurrent state: h = rms_norm(x) *
// attn_norm; [q|k|v] = conv(W_qkv h), z = W_gate h, beta and alpha; the gated delta rule;
// x += ssm_out(rms_norm(o) * ssm_norm * silu(z)). In the last layer only the output rows go on.
void delta_net(PassState& st, const LayerWeights& l);

// --- Mamba-2 (block_mamba2.cpp, model/state/mamba2.h) ---
// A whole Mamba-2 mixer over every segment's recurrent state, on h = rms_norm(x) * attn_norm:
// [z | xBC | dt] = ssm_in h (into `proj`: n_rows x (2 d_inner + 2 n_group d_state + n_head));
// y = the conv and the scan (plus D x); y = rms_norm(y * silu(z)) per group of d_inner / n_group
// times ssm_norm; x += ssm_out y. In the last layer only the output rows go on.
void mamba2(PassState& st, const LayerWeights& l, float* proj);

}  // namespace specula
