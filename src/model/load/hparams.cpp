// The hyperparameter readers (see hparams.h), with llama.cpp's defaults and generous range
// checks: anything beyond them is a corrupt file, not a model we could run anyway.
#include "model/load/hparams.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "common/error.h"
#include "model/load/arch.h"

namespace specula {

namespace {

constexpr int64_t kMaxEmbd = 1 << 16;
constexpr int64_t kMaxLayers = 1 << 10;
constexpr int64_t kMaxHeads = 1 << 12;
constexpr int64_t kMaxFF = 1 << 20;
constexpr int64_t kMaxCtx = 1 << 24;
constexpr int64_t kMaxExperts = 1 << 10;

std::string prefix(const HParams& hp) {
    return hp.arch + ".";
}

float get_positive_float(const GGUFFile& f, const std::string& key, double def) {
    const double v = f.get_float_or(key, def);
    if (!std::isfinite(v) || v <= 0) fail(f.path(), ": key '", key, "' = ", v, " must be > 0");
    return static_cast<float>(v);
}

// rope.scaling.{type,factor} (or the older rope.scale_linear): none, linear, or yarn where the
// architecture allows it. No factor means no scaling, whatever the type says.
void read_rope_scaling(const GGUFFile& f, const std::string& p, bool allow_yarn, HParams& hp) {
    const std::string type = f.get_string_or(p + "rope.scaling.type", "linear");
    const bool yarn = allow_yarn && type == "yarn";
    hp.rope_yarn = false;
    hp.rope_freq_scale = 1.f;
    double factor = f.get_float_or(p + "rope.scaling.factor", 0.0);
    if (factor == 0.0) factor = f.get_float_or(p + "rope.scale_linear", 0.0);
    if (type == "none" || factor == 0.0) return;
    if (type != "linear" && !yarn) {
        fail(f.path(), ": key '", p, "rope.scaling.type' = '", type,
             "' is not supported (supported: none, linear", allow_yarn ? ", yarn)" : ")");
    }
    hp.rope_yarn = yarn;
    if (!std::isfinite(factor) || factor < 0) {
        fail(f.path(), ": key '", p, "rope.scaling.factor' = ", factor, " must be > 0");
    }
    hp.rope_freq_scale = 1.0f / static_cast<float>(factor);  // in float, as ik_llama.cpp
}

// A per-layer count (`arr` gets the n_layer values when they differ, `v` their largest): the key
// as one integer, or where `per_layer` allows it an array of n_layer integers.
void get_layer_ints(const GGUFFile& f, const std::string& key, int n_layer, bool per_layer,
                    int64_t def, int64_t lo, int64_t hi, int& v, std::vector<int>& arr) {
    arr.clear();
    const GGUFValue* a = f.find(key);
    if (!per_layer || !a || a->type != GGUFType::ARRAY) {
        v = read_int(f, key, def, lo, hi);
        return;
    }
    const std::vector<int32_t> vals = f.get_int_array(key);
    if (vals.size() != size_t(n_layer)) {
        fail(f.path(), ": key '", key, "' has ", vals.size(), " values for ", n_layer,
             " layers (block_count)");
    }
    v = 0;
    for (size_t il = 0; il < vals.size(); ++il) {
        if (vals[il] < lo || vals[il] > hi) {
            fail(f.path(), ": key '", key, "'[", il, "] = ", vals[il], " is out of range [", lo,
                 ", ", hi, "]");
        }
        v = std::max(v, int(vals[il]));
    }
    if (std::adjacent_find(vals.begin(), vals.end(), std::not_equal_to<>()) != vals.end())
        arr.assign(vals.begin(), vals.end());
}

}  // namespace

int read_int(const GGUFFile& f, const std::string& key, int64_t def, int64_t lo, int64_t hi) {
    if (!f.has(key) && def < 0) fail(f.path(), ": missing key '", key, "'");
    const int64_t v = f.get_int_or(key, def);
    if (v < lo || v > hi) {
        fail(f.path(), ": key '", key, "' = ", v, " is out of range [", lo, ", ", hi, "]");
    }
    return static_cast<int>(v);
}

void read_base_hparams(const GGUFFile& f, HParams& hp, bool per_layer) {
    const std::string p = prefix(hp);
    hp.n_ctx_train = read_int(f, p + "context_length", -1, 1, kMaxCtx);
    hp.n_embd = read_int(f, p + "embedding_length", -1, 1, kMaxEmbd);
    hp.n_layer = read_int(f, p + "block_count", -1, 1, kMaxLayers);
    get_layer_ints(f, p + "feed_forward_length", hp.n_layer, per_layer, -1, 1, kMaxFF, hp.n_ff,
                   hp.n_ff_arr);
    hp.rms_eps = get_positive_float(f, p + "attention.layer_norm_rms_epsilon", 1e-5);
}

void read_attention_hparams(const GGUFFile& f, HParams& hp, bool per_layer) {
    const std::string p = prefix(hp);
    get_layer_ints(f, p + "attention.head_count", hp.n_layer, per_layer, -1, 1, kMaxHeads,
                   hp.n_head, hp.n_head_arr);
    get_layer_ints(f, p + "attention.head_count_kv", hp.n_layer, per_layer, hp.n_head, 1, hp.n_head,
                   hp.n_head_kv, hp.n_head_kv_arr);
    for (int il = 0; il < hp.n_layer; ++il) {
        if (hp.layer_n_head_kv(il) > hp.layer_n_head(il) ||
            hp.layer_n_head(il) % hp.layer_n_head_kv(il) != 0) {
            fail(f.path(), ": ", p, "attention.head_count (", hp.layer_n_head(il),
                 ") is not a multiple of attention.head_count_kv (", hp.layer_n_head_kv(il),
                 ") in layer ", il);
        }
    }
    if (!f.has(p + "attention.key_length") && hp.n_embd % hp.n_head != 0) {
        fail(f.path(), ": ", p, "embedding_length (", hp.n_embd,
             ") is not a multiple of attention.head_count (", hp.n_head, ")");
    }
    hp.head_dim = read_int(f, p + "attention.key_length", hp.n_embd / hp.n_head, 1, kMaxEmbd);
    if (f.get_int_or(p + "attention.value_length", hp.head_dim) != hp.head_dim) {
        fail(f.path(), ": ", p, "attention.value_length must equal attention.key_length (",
             hp.head_dim, ")");
    }
}

void read_rope_hparams(const GGUFFile& f, HParams& hp, bool allow_yarn) {
    const std::string p = prefix(hp);
    hp.n_rot = read_int(f, p + "rope.dimension_count", hp.head_dim, 0, kMaxEmbd);
    if (hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0) {
        fail(f.path(), ": ", p, "rope.dimension_count = ", hp.n_rot,
             " must be even and <= the head size ", hp.head_dim);
    }
    hp.rope_freq_base = get_positive_float(f, p + "rope.freq_base", 10000.0);
    read_rope_scaling(f, p, allow_yarn, hp);
    hp.n_ctx_orig =
        read_int(f, p + "rope.scaling.original_context_length", hp.n_ctx_train, 1, kMaxCtx);
    hp.rope_attn_factor = get_positive_float(f, p + "rope.scaling.attn_factor", 1.0);
}

void read_expert_hparams(const GGUFFile& f, HParams& hp) {
    const std::string p = prefix(hp);
    hp.n_expert = read_int(f, p + "expert_count", 0, 0, kMaxExperts);
    hp.n_expert_used = read_int(f, p + "expert_used_count", 0, 0, hp.n_expert);
    if (hp.n_expert > 0 && hp.n_expert_used == 0) {
        fail(f.path(), ": ", p, "expert_used_count must be >= 1 when expert_count is ",
             hp.n_expert);
    }
    hp.n_ff_expert = hp.n_ff;
}

void read_sliding_window(const GGUFFile& f, HParams& hp, int64_t def) {
    hp.n_swa = read_int(f, prefix(hp) + "attention.sliding_window", def, 1, kMaxCtx);
}

void read_expert_ff_length(const GGUFFile& f, HParams& hp) {
    hp.n_ff_expert = read_int(f, prefix(hp) + "expert_feed_forward_length", hp.n_ff, 1, kMaxFF);
}

void read_swa_flags(const GGUFFile& f, HParams& hp) {
    const std::string key = hp.arch + ".attention.sliding_window_pattern";
    const GGUFValue* v = f.find(key);
    if (!v) fail(f.path(), ": missing key '", key, "'");
    hp.swa_layers.assign(size_t(hp.n_layer), 0);
    if (v->type != GGUFType::ARRAY) {
        std::fill(hp.swa_layers.begin(), hp.swa_layers.end(), v->as_int(key) != 0);
        return;
    }
    const std::vector<int32_t> flags = f.get_int_array(key);
    if (flags.size() != size_t(hp.n_layer)) {
        fail(f.path(), ": key '", key, "' has ", flags.size(), " flags for ", hp.n_layer,
             " layers (block_count)");
    }
    for (size_t il = 0; il < flags.size(); ++il) hp.swa_layers[il] = flags[il] != 0;
}

}  // namespace specula
