// TensorBinder and the shared bindings (see weights.h).
#include "model/load/weights.h"

#include <sstream>

#include "common/error.h"
#include "kernels/quants.h"

namespace specula {

namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
    std::ostringstream os;
    os << "[";
    for (size_t i = 0; i < ne.size(); ++i) os << (i ? ", " : "") << ne[i];
    os << "]";
    return os.str();
}

}  // namespace

const GGUFTensor* TensorBinder::get(const std::string& name, const std::vector<int64_t>& ne,
                                    Need need) {
    const GGUFTensor* t = f_.find_tensor(name);
    if (!t) {
        if (need == Need::Required) fail(f_.path(), ": missing tensor '", name, "'");
        return nullptr;
    }
    if (t->ne != ne) {
        fail(f_.path(), ": tensor '", name, "' has shape ", shape_str(t->ne), ", expected ",
             shape_str(ne));
    }
    if (!type_traits(t->type).supported) {
        const auto nm = type_traits(t->type).name;
        fail(f_.path(), ": tensor '", name, "' has unsupported type ",
             nm.empty() ? std::to_string(static_cast<uint32_t>(t->type)) : std::string(nm));
    }
    return t;
}

void TensorBinder::check_rows(const std::string& name, const GGUFTensor& t) {
    if (t.ne[0] % type_traits(t.type).block_size != 0) {
        fail(f_.path(), ": tensor '", name, "' row length ", t.ne[0], " is not a multiple of the ",
             type_traits(t.type).name, " block size");
    }
}

WeightView TensorBinder::matrix(const std::string& name, const std::vector<int64_t>& ne,
                                Need need) {
    const GGUFTensor* t = get(name, ne, need);
    if (!t) return {};
    check_rows(name, *t);
    WeightView w;
    w.type = t->type;
    w.cols = t->ne[0];
    w.rows = t->n_rows();
    w.data = t->data;
    return w;
}

const float* TensorBinder::vector(const std::string& name, int64_t n, Need need) {
    return floats(name, {n}, need);
}

const float* TensorBinder::floats(const std::string& name, const std::vector<int64_t>& ne,
                                  Need need) {
    const GGUFTensor* t = get(name, ne, need);
    if (!t) return nullptr;
    if (t->type == GGMLType::F32) return reinterpret_cast<const float*>(t->data);
    check_rows(name, *t);
    const int64_t cols = t->ne[0], rows = t->n_rows();
    auto& v = w_.owned.emplace_back(static_cast<size_t>(cols * rows));
    const size_t rb = row_size(t->type, cols);
    for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(t->type, t->data + r * rb, v.data() + r * cols, cols);
    }
    return v.data();
}

std::string layer_prefix(int il) {
    return "blk." + std::to_string(il) + ".";
}

void bind_io(TensorBinder& b, const HParams& hp, ModelWeights& w) {
    w.tok_embd = b.matrix("token_embd.weight", {hp.n_embd, hp.n_vocab});
    w.output_norm = b.vector("output_norm.weight", hp.n_embd);
    w.output = b.matrix("output.weight", {hp.n_embd, hp.n_vocab}, Need::Optional);
    if (!w.output.data) w.output = w.tok_embd;  // tied embeddings
    if (const float* ff = b.vector("rope_freqs.weight", hp.n_rot / 2, Need::Optional)) {
        w.rope_freq_factors.assign(ff, ff + hp.n_rot / 2);
    }
}

void bind_attention(TensorBinder& b, const HParams& hp, const std::string& pre, Need qkv_bias,
                    LayerWeights& l) {
    const int64_t d = hp.n_embd, dq = hp.n_embd_q(), dkv = hp.n_embd_kv();
    l.attn_norm = b.vector(pre + "attn_norm.weight", d);
    l.wq = b.matrix(pre + "attn_q.weight", {d, dq});
    l.wk = b.matrix(pre + "attn_k.weight", {d, dkv});
    l.wv = b.matrix(pre + "attn_v.weight", {d, dkv});
    l.wo = b.matrix(pre + "attn_output.weight", {dq, d});
    l.bq = b.vector(pre + "attn_q.bias", dq, qkv_bias);
    l.bk = b.vector(pre + "attn_k.bias", dkv, qkv_bias);
    l.bv = b.vector(pre + "attn_v.bias", dkv, qkv_bias);
    l.bo = b.vector(pre + "attn_output.bias", d, Need::Optional);
}

void bind_qk_norm(TensorBinder& b, const HParams& hp, const std::string& pre, LayerWeights& l) {
    l.q_norm = b.vector(pre + "attn_q_norm.weight", hp.head_dim);
    l.k_norm = b.vector(pre + "attn_k_norm.weight", hp.head_dim);
}

void bind_post_norms(TensorBinder& b, const HParams& hp, const std::string& pre, LayerWeights& l) {
    l.attn_post_norm = b.vector(pre + "post_attention_norm.weight", hp.n_embd);
    l.ffn_post_norm = b.vector(pre + "post_ffw_norm.weight", hp.n_embd);
}

void bind_ffn(TensorBinder& b, const HParams& hp, const std::string& pre, LayerWeights& l) {
    const int64_t d = hp.n_embd, ne = hp.n_expert;
    int64_t ff = hp.n_ff;
    l.ffn_norm = b.vector(pre + "ffn_norm.weight", d);
    if (ne == 0) {
        l.ffn_gate = b.matrix(pre + "ffn_gate.weight", {d, ff});
        l.ffn_up = b.matrix(pre + "ffn_up.weight", {d, ff});
        l.ffn_down = b.matrix(pre + "ffn_down.weight", {ff, d});
        return;
    }
    ff = hp.n_ff_expert;
    // The router is a tiny [n_embd x n_expert] matrix, used as F32 like llama.cpp stores it.
    l.ffn_gate_inp = b.floats(pre + "ffn_gate_inp.weight", {d, ne});
    l.ffn_gate_exps = b.matrix(pre + "ffn_gate_exps.weight", {d, ff, ne});
    l.ffn_up_exps = b.matrix(pre + "ffn_up_exps.weight", {d, ff, ne});
    l.ffn_down_exps = b.matrix(pre + "ffn_down_exps.weight", {ff, d, ne});
}

}  // namespace specula
