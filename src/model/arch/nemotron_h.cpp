// Architecture "nemotron_h" (NVIDIA Nemotron-H, dense): a hybrid whose layers are each one of
// three kinds, as llama.cpp's nemotron_h graph computes them:
//   Mamba-2 mixer (model/blocks/blocks.h mamba2, model/state/mamba2.h: a recurrent state per
//            session, rolled back exactly inside a verify pass as qwen35's DeltaNet is);
//   attention: GQA without rope, scale 1/sqrt(head_dim), its KV cache the only one kept;
//   MLP:     x += ffn_down relu(ffn_up h)^2 (no gate).
// Every layer reads h = rms_norm(x) * attn_norm and adds its output to x.
//   hparams: nemotron_h.{context_length, embedding_length, block_count, attention.head_count,
//            attention.key_length / value_length (default embedding_length / head_count),
//            attention.layer_norm_rms_epsilon, and the layer kinds: attention.head_count_kv and
//            feed_forward_length, each an array of block_count values: head_count_kv[il] > 0 an
//            attention layer, feed_forward_length[il] > 0 an MLP layer, both 0 a Mamba-2 layer
//            (both > 0 is refused); ssm.conv_kernel, ssm.inner_size (d_inner),
//            ssm.state_size, ssm.time_step_rank (the Mamba-2 heads, dividing d_inner),
//            ssm.group_count (the B/C groups, dividing the heads)}. Experts (nemotron_h_moe's) are
//            refused, as are MTP (nextn) layers.
//   tensors: token_embd, output_norm, output (optional: tied); per layer attn_norm, and
//            Mamba-2: ssm_in [n_embd -> 2 d_inner + 2 n_group d_state + n_head], ssm_conv1d
//            [d_conv x conv_dim] with its optional bias, ssm_dt.bias, ssm_a and ssm_d [1 x n_head],
//            ssm_norm [d_inner / n_group x n_group], ssm_out [d_inner -> n_embd];
//            attention: attn_q, attn_k, attn_v, attn_output (optional biases);
//            MLP: ffn_up, ffn_down.
// A tensor of another kind than its layer's (per the two arrays) is an Error naming the tensor,
// the keys and the file, as is every bad or inconsistent SSM dimension.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/blocks/blocks.h"
#include "model/load/arch.h"

namespace specula {

namespace {

constexpr int64_t kMaxDim = 1 << 20;

// Layer kinds: the per-layer arrays (0 allowed: a layer without that part).
std::vector<int32_t> layer_array(const GGUFFile& f, const std::string& key, int n_layer,
                                 int64_t hi) {
    const std::vector<int32_t> v = f.get_int_array(key);
    if (v.size() != size_t(n_layer)) {
        fail(f.path(), ": key '", key, "' must be an array of ", n_layer,
             " values (block_count: one per layer, 0 where the layer has none), got ", v.size(),
             f.has(key) ? "" : " (missing)");
    }
    for (size_t il = 0; il < v.size(); ++il) {
        if (v[il] < 0 || v[il] > hi)
            fail(f.path(), ": key '", key, "'[", il, "] = ", v[il], " is out of range [0, ", hi,
                 "]");
    }
    return v;
}

void read_kinds(const GGUFFile& f, HParams& hp) {
    const std::string p = hp.arch + ".";
    const auto kv = layer_array(f, p + "attention.head_count_kv", hp.n_layer, hp.n_head);
    const auto ff = layer_array(f, p + "feed_forward_length", hp.n_layer, kMaxDim);
    hp.n_head_kv_arr.assign(kv.begin(), kv.end());
    hp.n_ff_arr.assign(ff.begin(), ff.end());
    hp.recurrent_layers.assign(size_t(hp.n_layer), 0);
    hp.n_head_kv = hp.n_ff = 0;
    for (int il = 0; il < hp.n_layer; ++il) {
        const int k = kv[size_t(il)], n = ff[size_t(il)];
        if (k > 0 && n > 0) {
            fail(f.path(), ": layer ", il, " has both ", p, "attention.head_count_kv = ", k,
                 " and ", p, "feed_forward_length = ", n,
                 ": a nemotron_h layer is one kind (attention, MLP, or Mamba-2 with both 0)");
        }
        if (k > 0 && hp.n_head % k != 0) {
            fail(f.path(), ": ", p, "attention.head_count (", hp.n_head,
                 ") is not a multiple of attention.head_count_kv[", il, "] = ", k);
        }
        hp.recurrent_layers[size_t(il)] = k == 0 && n == 0;
        hp.n_head_kv = std::max(hp.n_head_kv, k);
        hp.n_ff = std::max(hp.n_ff, n);
    }
}

void read_ssm(const GGUFFile& f, HParams& hp) {
    const std::string p = hp.arch + ".";
    hp.ssm_kind = HParams::SsmKind::Mamba2;
    hp.ssm_d_conv = read_int(f, p + "ssm.conv_kernel", -1, 1, 64);
    hp.ssm_d_inner = read_int(f, p + "ssm.inner_size", -1, 1, kMaxDim);
    hp.ssm_d_state = read_int(f, p + "ssm.state_size", -1, 1, 1 << 12);
    hp.ssm_dt_rank = read_int(f, p + "ssm.time_step_rank", -1, 1, 1 << 12);
    hp.ssm_n_group = read_int(f, p + "ssm.group_count", -1, 1, 1 << 12);
    if (hp.ssm_d_inner % hp.ssm_dt_rank != 0) {
        fail(f.path(), ": key '", p, "ssm.inner_size' = ", hp.ssm_d_inner,
             " is not a multiple of ssm.time_step_rank = ", hp.ssm_dt_rank, " (the heads)");
    }
    if (hp.ssm_dt_rank % hp.ssm_n_group != 0) {
        fail(f.path(), ": key '", p, "ssm.time_step_rank' = ", hp.ssm_dt_rank,
             " (the heads) is not a multiple of ssm.group_count = ", hp.ssm_n_group);
    }
}

void read_hparams(const GGUFFile& f, HParams& hp) {
    const std::string p = hp.arch + ".";
    hp.n_ctx_train = read_int(f, p + "context_length", -1, 1, 1 << 24);
    hp.n_embd = read_int(f, p + "embedding_length", -1, 1, 1 << 16);
    hp.n_layer = read_int(f, p + "block_count", -1, 1, 1 << 10);
    hp.n_head = read_int(f, p + "attention.head_count", -1, 1, 1 << 12);
    const double eps = f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5);
    if (!std::isfinite(eps) || eps <= 0)
        fail(f.path(), ": key '", p, "attention.layer_norm_rms_epsilon' = ", eps, " must be > 0");
    hp.rms_eps = float(eps);
    if (!f.has(p + "attention.key_length") && hp.n_embd % hp.n_head != 0) {
        fail(f.path(), ": ", p, "embedding_length (", hp.n_embd,
             ") is not a multiple of attention.head_count (", hp.n_head, ")");
    }
    hp.head_dim = read_int(f, p + "attention.key_length", hp.n_embd / hp.n_head, 1, 1 << 16);
    if (f.get_int_or(p + "attention.value_length", hp.head_dim) != hp.head_dim) {
        fail(f.path(), ": ", p, "attention.value_length must equal attention.key_length (",
             hp.head_dim, ")");
    }
    if (f.get_int_or(p + "expert_count", 0) != 0) {
        fail(f.path(), ": key '", p,
             "expert_count' is set: Nemotron-H's mixture of experts (nemotron_h_moe) is not "
             "supported");
    }
    if (f.get_int_or(p + "nextn_predict_layers", 0) != 0) {
        fail(f.path(), ": key '", p,
             "nextn_predict_layers' is set: Nemotron-H's MTP layers are not supported (they would "
             "run as main layers)");
    }
    hp.n_rot = 0;  // no rope
    read_kinds(f, hp);
    read_ssm(f, hp);
}

// 'M' (Mamba-2), 'A' (attention) or 'F' (MLP): what layer il is, and what a tensor name's part
// after "blk.N." says it belongs to ('-': any kind, e.g. attn_norm).
char layer_kind(const HParams& hp, int il) {
    return hp.is_recurrent(il) ? 'M' : hp.layer_n_head_kv(il) > 0 ? 'A' : 'F';
}
char tensor_kind(const std::string& part) {
    if (part.rfind("ssm_", 0) == 0) return 'M';
    if (part.rfind("attn_norm", 0) == 0) return '-';
    if (part.rfind("attn_", 0) == 0) return 'A';
    if (part.rfind("ffn_", 0) == 0) return 'F';
    return '-';
}

// Every layer tensor belongs to its layer's kind: a file whose arrays say otherwise is refused
// naming the tensor (the missing ones are named by the binder).
void check_kinds(const GGUFFile& f, const HParams& hp) {
    static const char* const kNames[] = {"a Mamba-2", "an attention", "an MLP"};
    const auto name_of = [](char k) { return kNames[k == 'M' ? 0 : k == 'A' ? 1 : 2]; };
    for (const GGUFTensor& t : f.tensors()) {
        if (t.name.rfind("blk.", 0) != 0) continue;
        const size_t dot = t.name.find('.', 4);
        if (dot == std::string::npos) continue;
        const int il = std::atoi(t.name.c_str() + 4);
        if (il < 0 || il >= hp.n_layer) continue;  // file_checks names a layer past block_count
        const char k = tensor_kind(t.name.substr(dot + 1)), want = layer_kind(hp, il);
        if (k == '-' || k == want) continue;
        fail(f.path(), ": tensor '", t.name, "' belongs to ", name_of(k), " layer, but layer ", il,
             " is ", name_of(want), " layer by keys '", hp.arch, ".attention.head_count_kv' and '",
             hp.arch, ".feed_forward_length' (", hp.layer_n_head_kv(il), ", ", hp.layer_n_ff(il),
             ")");
    }
}

void bind_mamba2(TensorBinder& b, const HParams& hp, const std::string& pre, LayerWeights& l) {
    const int64_t d = hp.n_embd, di = hp.ssm_d_inner, ng = hp.ssm_n_group, nh = hp.ssm_dt_rank;
    const int64_t C = hp.ssm_conv_dim();
    l.ssm_in = b.matrix(pre + "ssm_in.weight", {d, 2 * di + 2 * ng * hp.ssm_d_state + nh});
    l.ssm_conv1d = b.floats(pre + "ssm_conv1d.weight", {hp.ssm_d_conv, C});
    l.ssm_conv1d_b = b.vector(pre + "ssm_conv1d.bias", C, Need::Optional);
    l.ssm_dt = b.vector(pre + "ssm_dt.bias", nh);
    l.ssm_a = b.floats(pre + "ssm_a", {1, nh});
    l.ssm_d = b.floats(pre + "ssm_d", {1, nh});
    l.ssm_norm = b.floats(pre + "ssm_norm.weight", {di / ng, ng});
    l.ssm_out = b.matrix(pre + "ssm_out.weight", {di, d});
}

void bind_attention_layer(TensorBinder& b, const HParams& hp, int il, const std::string& pre,
                          LayerWeights& l) {
    const int64_t d = hp.n_embd, dq = hp.layer_n_embd_q(il), dkv = hp.layer_n_embd_kv(il);
    l.wq = b.matrix(pre + "attn_q.weight", {d, dq});
    l.wk = b.matrix(pre + "attn_k.weight", {d, dkv});
    l.wv = b.matrix(pre + "attn_v.weight", {d, dkv});
    l.wo = b.matrix(pre + "attn_output.weight", {dq, d});
    l.bq = b.vector(pre + "attn_q.bias", dq, Need::Optional);
    l.bk = b.vector(pre + "attn_k.bias", dkv, Need::Optional);
    l.bv = b.vector(pre + "attn_v.bias", dkv, Need::Optional);
    l.bo = b.vector(pre + "attn_output.bias", d, Need::Optional);
}

void bind_mlp(TensorBinder& b, const HParams& hp, int il, const std::string& pre, LayerWeights& l) {
    const int64_t d = hp.n_embd, ff = hp.layer_n_ff(il);
    l.ffn_up = b.matrix(pre + "ffn_up.weight", {d, ff});
    l.ffn_down = b.matrix(pre + "ffn_down.weight", {ff, d});
    for (const char* bias : {"ffn_up.bias", "ffn_down.bias"}) {
        if (b.vector(pre + bias, bias[4] == 'u' ? ff : d, Need::Optional))
            fail(b.path(), ": tensor '", pre, bias, "': MLP biases are not supported");
    }
}

void bind_tensors(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    bind_io(b, hp, w);
    if (!w.rope_freq_factors.empty()) fail(b.path(), ": tensor 'rope_freqs.weight': no rope here");
    w.layers.resize(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string pre = layer_prefix(il);
        LayerWeights& l = w.layers[size_t(il)];
        l.attn_norm = b.vector(pre + "attn_norm.weight", hp.n_embd);
        switch (layer_kind(hp, il)) {
            case 'M':
                bind_mamba2(b, hp, pre, l);
                break;
            case 'A':
                bind_attention_layer(b, hp, il, pre, l);
                break;
            default:
                bind_mlp(b, hp, il, pre, l);
        }
    }
}

// The pass's own buffer: ssm_in's output rows (none without a Mamba-2 layer, whatever the ssm
// keys say).
enum Scratch { kProj };
std::vector<int64_t> scratch(const HParams& hp) {
    if (hp.n_recurrent() == 0) return {0};
    return {2 * int64_t(hp.ssm_d_inner) + 2 * hp.ssm_key_dim() + hp.ssm_dt_rank};
}

// In the last layer, each segment's output rows of x move to the front (the layer computes only
// those: PassState::rows).
void front_output_rows(PassState& st) {
    const size_t d = size_t(st.hp.n_embd);
    for (size_t s = 0; s < st.segs.size(); ++s) {
        const int src = st.off[s] + st.n[s] - st.n_out[s], dst = st.out_off[s];
        if (st.n_out[s] == 0 || src == dst) continue;
        std::memmove(st.x.data() + size_t(dst) * d, st.x.data() + size_t(src) * d,
                     sizeof(float) * size_t(st.n_out[s]) * d);
    }
}

// x += ffn_down relu(ffn_up h)^2, h = rms_norm(x) * attn_norm.
void mlp(PassState& st, const LayerWeights& l) {
    if (st.last) front_output_rows(st);
    ThreadPool& pool = *st.pool;
    const int64_t d = st.hp.n_embd, ff = st.hp.layer_n_ff(st.il);
    const int nr = st.rows;
    norm_rows(st, st.x.data(), l.attn_norm, nr, st.h.data());
    matmul(l.ffn_up, st.h.data(), d, nr, st.ff_u.data(), ff, pool, st.mm);
    float* u = st.ff_u.data();
    over_items(pool, nr, ff, [&](int64_t t0, int64_t t1) {
        for (int64_t i = t0 * ff; i < t1 * ff; ++i) {
            const float r = u[i] > 0.0f ? u[i] : 0.0f;
            u[i] = r * r;
        }
    });
    matmul(l.ffn_down, u, ff, nr, st.tmp.data(), d, pool, st.mm);
    add_into_all(pool, st.x.data(), st.tmp.data(), int64_t(nr) * d);
}

void block(PassState& st, const LayerWeights& l) {
    if (l.ssm_in.data) {
        mamba2(st, l, st.arch[kProj].data());
    } else if (l.wq.data) {
        attention_input(st, l);
        rope_and_cache(st);  // n_rot 0: only the cache writes
        attention_output(st, l);
    } else {
        mlp(st, l);
    }
}

void read(const GGUFFile& f, HParams& hp) {
    read_hparams(f, hp);
    check_kinds(f, hp);
}

}  // namespace

// The Vulkan backend has no Mamba-2 shader: nemotron_h layers run on the CPU.
const ArchSpec kNemotronHArch = {.name = "nemotron_h",
                                 .read = read,
                                 .bind = bind_tensors,
                                 .block = block,
                                 .device_block = false,
                                 .scratch = scratch};

}  // namespace specula
