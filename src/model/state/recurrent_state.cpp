// RecurrentState (see recurrent_state.h).
#include "model/state/recurrent_state.h"

#include <algorithm>

#include "common/error.h"
#include "model/load/model.h"

namespace specula {

DeltaNetShape delta_net_shape(const HParams& hp) {
    DeltaNetShape s;
    s.d_conv = hp.ssm_d_conv;
    s.conv_dim = hp.ssm_conv_dim();
    s.n_k_heads = hp.ssm_n_group;
    s.n_v_heads = hp.ssm_dt_rank;
    s.head_dim = hp.ssm_d_state;
    s.eps = hp.rms_eps;
    return s;
}

namespace {

// Per recurrent layer: the conv state and the recurrence's state (floats), and per kept position
// the conv inputs and the gate values (DeltaNet's g and beta, Mamba-2's dt).
struct LayerSizes {
    int64_t conv_state = 0, ssm_state = 0;
    int conv_dim = 0, n_gate = 0;
};

LayerSizes layer_sizes(const HParams& hp) {
    LayerSizes z;
    if (hp.ssm_kind == HParams::SsmKind::Mamba2) {
        const Mamba2Shape s = mamba2_shape(hp);
        z = {s.conv_state(), s.ssm_state(), s.conv_dim(), s.n_head};
    } else {
        const DeltaNetShape s = delta_net_shape(hp);
        z = {s.conv_state(), s.ssm_state(), s.conv_dim, 2 * s.n_v_heads};
    }
    return z;
}

}  // namespace

double RecurrentState::bytes(const HParams& hp, bool rollback) {
    const int n = hp.n_recurrent();
    if (n == 0) return 0;
    const LayerSizes z = layer_sizes(hp);
    const double state = double(z.conv_state) + double(z.ssm_state);
    double per_layer = state;
    double scratch = 0;
    if (rollback) {
        per_layer = 2 * state + double(kKeepMax) * (z.conv_dim + double(z.n_gate));
        scratch = double(kKeepMax) * z.conv_dim;
    }
    return sizeof(float) * (n * per_layer + scratch);
}

RecurrentState::RecurrentState(const HParams& hp, bool rollback)
    : mamba2_(hp.ssm_kind == HParams::SsmKind::Mamba2), rollback_(rollback) {
    if (hp.n_recurrent() == 0) return;
    if (mamba2_)
        m2_ = mamba2_shape(hp);
    else
        shape_ = delta_net_shape(hp);
    const LayerSizes z = layer_sizes(hp);
    conv_dim_ = z.conv_dim;
    n_gate_ = z.n_gate;
    conv_state_ = z.conv_state;
    ssm_state_ = z.ssm_state;
    slot_of_.assign(size_t(hp.n_layer), -1);
    const int nb = rollback ? 2 : 1;
    for (int il = 0; il < hp.n_layer; ++il) {
        if (!hp.is_recurrent(il)) continue;
        slot_of_[size_t(il)] = int(slots_.size());
        Slot& s = slots_.emplace_back();
        for (int b = 0; b < nb; ++b) {
            s.conv[b].assign(size_t(conv_state_), 0.0f);
            s.ssm[b].assign(size_t(ssm_state_), 0.0f);
        }
        if (rollback) {  // DeltaNet's g and beta are n_gate / 2 each; Mamba-2's dt all of it
            s.x.resize(size_t(kKeepMax) * conv_dim_);
            s.g.resize(size_t(kKeepMax) * (mamba2_ ? n_gate_ : n_gate_ / 2));
            if (!mamba2_) s.beta.resize(size_t(kKeepMax) * (n_gate_ / 2));
        }
    }
    if (rollback) scratch_.resize(size_t(kKeepMax) * conv_dim_);
}

void RecurrentState::begin_pass(int pos0, int n) {
    if (rollback_) cur_ = 1 - cur_;
    pass_start_ = pos0;
    pass_len_ = n;
    kept_ = rollback_ && n <= kKeepMax;
}

RecurrentState::LayerIO RecurrentState::layer(int il) {
    Slot& s = slots_[size_t(slot_of_[size_t(il)])];
    const int snap = rollback_ ? 1 - cur_ : cur_;
    LayerIO io;
    io.conv_in = s.conv[snap].data();
    io.ssm_in = s.ssm[snap].data();
    io.conv_out = s.conv[cur_].data();
    io.ssm_out = s.ssm[cur_].data();
    if (kept_) {
        io.keep_x = s.x.data();
        io.keep_g = s.g.data();
        io.keep_beta = s.beta.empty() ? nullptr : s.beta.data();
    }
    return io;
}

int RecurrentState::restorable_floor(int n, int n_past) const {
    n = std::min(n, n_past);
    if (empty() || n == n_past) return n;
    const int end = pass_start_ + pass_len_;
    if (n >= pass_start_ && n <= end && (kept_ || n == pass_start_) && rollback_) return n;
    if (n >= pass_start_ && rollback_) return pass_start_;
    return 0;
}

void RecurrentState::zero() {
    for (Slot& s : slots_) {
        for (auto* v : {&s.conv[0], &s.conv[1], &s.ssm[0], &s.ssm[1]})
            std::fill(v->begin(), v->end(), 0.0f);
    }
    pass_start_ = pass_len_ = 0;
    kept_ = false;
}

void RecurrentState::restore(const Model& m, int n, int n_past, ThreadPool& pool) {
    if (empty() || n == n_past) return;
    if (restorable_floor(n, n_past) != n) {
        fail("rollback(", n, "): the recurrent state can return only to position 0, to the last ",
             "pass's start (", pass_start_, ") or inside it when it was at most ", kKeepMax,
             " tokens (n_past = ", n_past, ")");
    }
    if (n == 0) return zero();
    const int steps = n - pass_start_;
    for (int il = 0; il < int(slot_of_.size()); ++il)
        if (slot_of_[size_t(il)] >= 0) replay(m, il, steps, pool);
    pass_len_ = steps;
}

// Layer il's state from the snapshot through the first `steps` kept positions of the last pass.
void RecurrentState::replay(const Model& m, int il, int steps, ThreadPool& pool) {
    const int snap = 1 - cur_;
    Slot& s = slots_[size_t(slot_of_[size_t(il)])];
    const LayerWeights& l = m.layers[size_t(il)];
    if (mamba2_) {
        const Mamba2Weights w{l.ssm_conv1d, l.ssm_conv1d_b, l.ssm_a, l.ssm_d};
        mamba2_run(m2_, w, s.conv[snap].data(), s.conv[cur_].data(), s.ssm[snap].data(),
                   s.ssm[cur_].data(), s.x.data(), s.g.data(), steps, nullptr, scratch_.data(),
                   pool);
        return;
    }
    delta_net_run(shape_, l.ssm_conv1d, s.conv[snap].data(), s.conv[cur_].data(),
                  s.ssm[snap].data(), s.ssm[cur_].data(), s.x.data(), s.g.data(), s.beta.data(),
                  steps, nullptr, scratch_.data(), pool);
}

}  // namespace specula
