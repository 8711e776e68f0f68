// The recurrent state of one sequence of a hybrid model (qwen35's Gated DeltaNet layers,
// model/state/delta_net.h; nemotron_h's Mamba-2 layers, model/state/mamba2.h: HParams::ssm_kind),
// kept by its Session next to the KV cache, all in F32: per recurrent layer the conv state
// ((d_conv - 1) x conv_dim) and the recurrence's state (DeltaNet: n_v_heads x head_dim^2;
// Mamba-2: d_inner x d_state).
//
// Exact rollback for speculation. A verify pass over [last, drafts] must be able to stop after
// any of its positions. Two ways:
//   (a) copy the whole state after every position of the pass (n copies of every layer's state:
//       ~19 MB a position for Qwen3.5-0.8B's shape, 18 layers of 16 heads of 128^2 floats, so
//       ~170 MB written per 9-token verify pass), rollback = one copy;
//   (b) keep the state as it was when the pass began (free: the pass writes into the other of
//       two buffers instead of in place) and the pass's per-position inputs of the recurrence
//       (conv_dim + 2 n_v_heads floats a position and layer, ~1/1000 of a state), and on
//       rollback to position i replay positions [start, i) from the snapshot: only the conv and
//       the delta rule (Mamba-2: the conv and the scan, over conv_dim + n_head inputs a
//       position), no matmul, bit-identical to the pass (same code, same order).
// (b) is what this does: a pass costs nothing extra but the input copies; a rollback costs at
// most the recurrence of the accepted tokens (a fraction of the pass), and an all-accepted step
// nothing. Memory: two states plus kKeepMax positions of inputs per layer (bytes()).
// Measured on a random file of Qwen3.5-0.8B's layer shapes (8 layers, 6 DeltaNet, Q8_0; 6.7 MB
// of state), one thread of a loaded 2-core Zen 4: a 9-token verify pass 39.9 ms with this
// support vs 41.6 ms without (noise: no measurable overhead), a rollback keeping 5 of the 9
// positions 3.9 ms (replaying 5 positions), so a rejecting step costs ~1.05x (at most ~1.15x
// when 8 are kept); (a)'s nine state copies cost 5.8 ms on every pass, accepted or not.
// `specula bench` prints the same figure (RollbackRow): on a Qwen3.5-2B-shaped Q8_0 file (12
// DeltaNet layers of 16 heads of 128^2, 12.6 MB of state), 2 threads of Zen 5, a 9-token pass
// keeping 1 costs 1.09x the pass without rollback support and keeping 8 1.18x; 4 tokens keeping
// 3, 1.14x.
//
// Reachable positions: n_past (the state), the last pass's start (the snapshot), any position
// inside the last pass when it was at most kKeepMax tokens (its inputs were kept), and 0 (zeros).
// Further back is gone: Session::rollback refuses it with an Error, common_prefix never reports it
// (restorable_floor).
#pragma once

#include <vector>

#include "common/threadpool.h"
#include "model/load/hparams.h"
#include "model/state/delta_net.h"
#include "model/state/mamba2.h"

namespace specula {

class Model;

// The recurrence's shape for hp (its ssm_* sizes, rms_eps as the L2 norm's eps).
DeltaNetShape delta_net_shape(const HParams& hp);

class RecurrentState {
  public:
    // A pass of at most this many tokens keeps its inputs (rollback inside it).
    static constexpr int kKeepMax = 64;

    RecurrentState() = default;
    // Zero state for hp's recurrent layers (none: empty()). rollback = false: one buffer updated
    // in place and no inputs kept (only n_past and 0 reachable; the cost baseline).
    RecurrentState(const HParams& hp, bool rollback = true);

    // Bytes a session's state takes for hp (0 without recurrent layers).
    static double bytes(const HParams& hp, bool rollback = true);

    bool empty() const { return slots_.empty(); }

    // A pass of n tokens at positions pos0 .. begins: the current state becomes the snapshot.
    void begin_pass(int pos0, int n);

    // Layer il's buffers for the pass (il recurrent).
    struct LayerIO {
        const float *conv_in = nullptr, *ssm_in = nullptr;
        float *conv_out = nullptr, *ssm_out = nullptr;
        // Where the pass's inputs go (x: n x conv_dim, g and beta: n x n_v; Mamba-2: its dt in
        // keep_g, n x n_head, and no beta); null: not kept.
        float *keep_x = nullptr, *keep_g = nullptr, *keep_beta = nullptr;
    };
    LayerIO layer(int il);

    // The largest position <= n (and <= n_past) the state can return to.
    int restorable_floor(int n, int n_past) const;
    // Returns the state to position n (restorable_floor(n, n_past) == n), replaying the kept
    // inputs of the last pass with m's conv weights.
    void restore(const Model& m, int n, int n_past, ThreadPool& pool);

  private:
    struct Slot {
        std::vector<float> conv[2], ssm[2];
        std::vector<float> x, g, beta;  // kept inputs of the last pass
    };
    void zero();

    void replay(const Model& m, int il, int steps, ThreadPool& pool);

    bool mamba2_ = false;  // HParams::SsmKind::Mamba2: m2_, else shape_
    DeltaNetShape shape_;
    Mamba2Shape m2_;
    int conv_dim_ = 0, n_gate_ = 0;           // per kept position: conv_dim_ x, n_gate_ g values
    int64_t conv_state_ = 0, ssm_state_ = 0;  // floats per layer
    bool rollback_ = true;
    std::vector<int> slot_of_;  // per layer: its slot, or -1
    std::vector<Slot> slots_;
    std::vector<float> scratch_;  // replay: kKeepMax x conv_dim
    int cur_ = 0;                 // the buffer holding the state at n_past (the other: snapshot)
    int pass_start_ = 0, pass_len_ = 0;
    bool kept_ = false;
};

}  // namespace specula
