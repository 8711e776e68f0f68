// The state of one forward pass, as plain data (llama2.c's RunState): the rows it carries, the
// segments they belong to, the buffers every block reads and writes, and a scratch owned by the
// architecture. The shared blocks (model/blocks/blocks.h) are free functions over it, and an
// architecture's file (model/arch/) may write its own steps over it too: everything here is open.
//
// Rows: x holds one row of n_embd per token of the pass, segment after segment (off[s], n[s]).
// Every layer but the last carries every row; the last carries only each segment's output rows
// (the last n_out[s] of its rows), which its attention moves to the front of x (out_off[s]), so
// the FFN, the final norm and the output matmul skip the rest. `rows` is what the current
// layer's FFN takes: n_rows, or n_out_rows in the last layer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/threadpool.h"
#include "kernels/matmul.h"
#include "model/blocks/attention.h"
#include "model/blocks/moe.h"
#include "model/blocks/rope.h"
#include "model/state/delta_net.h"
#include "model/state/sequence_state.h"

namespace specula {

// One sequence's share of a pass: its tokens go to positions n_past() .. of its own cache.
struct PassSegment {
    SequenceState* seq = nullptr;
    std::span<const token_id> tokens;
    bool all_logits = true;  // false: only the last token's logits
    int logits_row = 0;      // the first row of the session's logits this pass writes
};

// One session's share of an MTP head pass (ForwardPass::run_mtp): MTP positions mtp_n_past() ..
// of its head cache take [next[i], hidden row i].
struct MtpSegment {
    SequenceState* seq = nullptr;
    std::span<const token_id> next;
    const float* hidden = nullptr;  // next.size() rows of n_embd
};

struct PassState {
    explicit PassState(const Model& model);

    const Model& model;
    const HParams hp;
    MatmulScratch mm;
    MoeFFN moe;
    RopeParams rope;
    RopeParams rope_swa;    // sliding-window layers' (HParams::rope_freq_*_swa)
    bool swa_rope = false;  // some layer rotates with its own angles: rope_cs_swa is filled
    AttentionShape att_shape;
    DeltaNetShape dn_shape;  // hybrid models' recurrent layers

    // --- The pass being run ---
    std::span<const PassSegment> segs;
    ThreadPool* pool = nullptr;
    int il = 0;         // the layer being run
    bool last = false;  // the last layer: only output rows after the attention
    int rows = 0;       // rows x carries into the FFN (n_rows, or n_out_rows in the last layer)
    bool mtp = false;   // an MTP head pass: attention reads and writes each session's head cache
    // Per segment: first row, rows, first output row, output rows (the last n_out of its rows).
    std::vector<int> off, n, out_off, n_out;
    int n_rows = 0, n_out_rows = 0;

    // --- Buffers (they grow to the largest pass seen and are reused) ---
    std::vector<float> x, h, tmp;             // n_embd per row: the residual, a normed copy, a sum
    std::vector<float> q, k, v, att;          // the attention's (n_embd_q / n_embd_kv per row)
    std::vector<float> ff_g, ff_u;            // the FFN's gate and up (n_ff per row)
    std::vector<float> rope_cs, rope_cs_swa;  // each row's rotation angles (n_rot per row)
    std::vector<float> logits;                // the output rows of a pass over several sequences
    std::vector<float> scores;                // the attention's scratch (counted with the KV cache)
    // The DeltaNet block's inputs (x, z, beta, alpha, g), outputs and conv scratch; the shared
    // expert's gate, up and down.
    std::vector<float> dn_x, dn_z, dn_b, dn_a, dn_g, dn_o, dn_scratch, sh_g, sh_u, sh_d;
    // The architecture's own buffers: arch[i] holds a row of ArchSpec::scratch's i-th width for
    // every row of the pass (model/load/arch.h).
    std::vector<std::vector<float>> arch;

    // The cache segment s's attention reads and writes (its session's, or its MTP head's), and
    // the layer of that cache the current layer is.
    KVCache& kv_of(size_t s) const { return mtp ? *segs[s].seq->mtp_kv : segs[s].seq->kv; }
    int kv_layer() const { return mtp ? 0 : hp.kv_layer(il); }
    // Layer il's attention shape: att_shape with that layer's heads, head size, scale and
    // window.
    AttentionShape layer_shape(int layer) const;
    // Position of row t of segment s (t counted from the segment's first row).
    int pos(size_t s, int t) const { return kv_of(s).n_past() + t; }
};

// Elements from which an elementwise op of the pass is split over the pool: a verify's rows
// (a 9-token pass of d4096 is 36,864 per norm), never a decode step's (a few microseconds, about
// what one more wake-up of the pool costs on a loaded machine). The caller claims items itself,
// so a worker that does not wake costs nothing but the claim. (At 1 << 17, a 9-token pass of an
// 8B-shaped model ran its norms, silu and adds on one thread while the other waited: ~4% of that
// pass's time in a profile, on an Intel Xeon with 2 threads.)
inline constexpr int64_t kParallelElems = 1 << 15;

// fn(b, e) over [0, n) in items of `width` elements: on the pool's threads when the whole is big
// enough, else on this one. Every element goes through the same operations either way, so the
// split changes no bit.
template <class F>
void over_items(ThreadPool& pool, int64_t n, int64_t width, F&& fn) {
    if (n * width < kParallelElems || pool.size() == 1) return fn(int64_t{0}, n);
    pool.parallel_for(n, fn);
}

// Grows v to at least n elements (buffers only grow: steady state allocates nothing).
template <class T>
void grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

// out[t] = rms_norm(in[t]) * w for ntok rows of n_embd (in == out allowed).
void norm_rows(PassState& st, const float* in, const float* w, int ntok, float* out);
// y[t] += b for ntok rows of `width` values `ld` apart (nothing when b is null).
void add_bias(float* y, const float* b, int ntok, int64_t width, int64_t ld);
// g = silu(g) * u, g = gelu(g) * u, y += x over n elements, split over the pool.
void silu_mul_all(ThreadPool& pool, float* g, const float* u, int64_t n);
void gelu_mul_all(ThreadPool& pool, float* g, const float* u, int64_t n);
void add_into_all(ThreadPool& pool, float* y, const float* x, int64_t n);

}  // namespace specula
