// Model::load: opens the GGUF, builds the tokenizer and hyperparameters, and binds every weight
// the forward pass uses to a view of the mapped file after checking its shape and type. Small
// vectors (norms, biases, router) that are not F32 are dequantized into owned F32 copies.
#include "model/model.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string_view>

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

// Binds tensors by name, checking shape (ggml order, ne[0] first) and type support.
class Binder {
  public:
    Binder(const GGUFFile& f, Model& m) : f_(f), m_(m) {}

    // nullptr when absent and !required.
    const GGUFTensor* get(const std::string& name, const std::vector<int64_t>& ne, bool required) {
        const GGUFTensor* t = f_.find_tensor(name);
        if (!t) {
            if (required) fail(f_.path(), ": missing tensor '", name, "'");
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

    // A matrix of `rows` rows of `cols` elements; ne = [cols, rows] or [cols, rows/k, k] (experts).
    WeightView matrix(const std::string& name, const std::vector<int64_t>& ne,
                      bool required = true) {
        const GGUFTensor* t = get(name, ne, required);
        if (!t) return {};
        if (t->ne[0] % type_traits(t->type).block_size != 0) {
            fail(f_.path(), ": tensor '", name, "' row length ", t->ne[0],
                 " is not a multiple of the ", type_traits(t->type).name, " block size");
        }
        WeightView w;
        w.type = t->type;
        w.cols = t->ne[0];
        w.rows = t->n_rows();
        w.data = t->data;
        return w;
    }

    // An F32 vector of n elements: the mapped data when the file stores F32, else an owned copy.
    const float* vector(const std::string& name, int64_t n, bool required = true) {
        return floats(name, {n}, required);
    }

    // Any small tensor as F32 values (mapped when F32, else dequantized row by row).
    const float* floats(const std::string& name, const std::vector<int64_t>& ne,
                        bool required = true) {
        const GGUFTensor* t = get(name, ne, required);
        if (!t) return nullptr;
        if (t->type == GGMLType::F32) return reinterpret_cast<const float*>(t->data);
        const int64_t cols = t->ne[0], rows = t->n_rows();
        if (cols % type_traits(t->type).block_size != 0) {
            fail(f_.path(), ": tensor '", name, "' row length ", cols, " is not a multiple of the ",
                 type_traits(t->type).name, " block size");
        }
        auto& v = m_.owned.emplace_back(static_cast<size_t>(cols * rows));
        const size_t rb = row_size(t->type, cols);
        for (int64_t r = 0; r < rows; ++r) {
            dequantize_row(t->type, t->data + r * rb, v.data() + r * cols, cols);
        }
        return v.data();
    }

  private:
    const GGUFFile& f_;
    Model& m_;
};

void bind_attention(Binder& b, const HParams& hp, const std::string& pre, LayerWeights& l) {
    const int64_t d = hp.n_embd, dq = hp.n_embd_q(), dkv = hp.n_embd_kv();
    const bool need_bias = hp.arch == Arch::Qwen2;
    l.attn_norm = b.vector(pre + "attn_norm.weight", d);
    l.wq = b.matrix(pre + "attn_q.weight", {d, dq});
    l.wk = b.matrix(pre + "attn_k.weight", {d, dkv});
    l.wv = b.matrix(pre + "attn_v.weight", {d, dkv});
    l.wo = b.matrix(pre + "attn_output.weight", {dq, d});
    l.bq = b.vector(pre + "attn_q.bias", dq, need_bias);
    l.bk = b.vector(pre + "attn_k.bias", dkv, need_bias);
    l.bv = b.vector(pre + "attn_v.bias", dkv, need_bias);
    l.bo = b.vector(pre + "attn_output.bias", d, false);
}

void bind_ffn(Binder& b, const HParams& hp, const std::string& pre, LayerWeights& l) {
    const int64_t d = hp.n_embd, ff = hp.n_ff, ne = hp.n_expert;
    l.ffn_norm = b.vector(pre + "ffn_norm.weight", d);
    if (ne == 0) {
        l.ffn_gate = b.matrix(pre + "ffn_gate.weight", {d, ff});
        l.ffn_up = b.matrix(pre + "ffn_up.weight", {d, ff});
        l.ffn_down = b.matrix(pre + "ffn_down.weight", {ff, d});
        return;
    }
    // The router is a tiny [n_embd x n_expert] matrix, used as F32 like llama.cpp stores it.
    l.ffn_gate_inp = b.floats(pre + "ffn_gate_inp.weight", {d, ne});
    l.ffn_gate_exps = b.matrix(pre + "ffn_gate_exps.weight", {d, ff, ne});
    l.ffn_up_exps = b.matrix(pre + "ffn_up_exps.weight", {d, ff, ne});
    l.ffn_down_exps = b.matrix(pre + "ffn_down_exps.weight", {ff, d, ne});
}

void bind_weights(const GGUFFile& f, const HParams& hp, Model& m) {
    Binder b(f, m);
    m.tok_embd = b.matrix("token_embd.weight", {hp.n_embd, hp.n_vocab});
    m.output_norm = b.vector("output_norm.weight", hp.n_embd);
    m.output = b.matrix("output.weight", {hp.n_embd, hp.n_vocab}, false);
    if (!m.output.data) m.output = m.tok_embd;  // tied embeddings
    if (const float* ff = b.vector("rope_freqs.weight", hp.n_rot / 2, false)) {
        m.rope_freq_factors.assign(ff, ff + hp.n_rot / 2);
    }
    m.layers.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string pre = "blk." + std::to_string(il) + ".";
        bind_attention(b, hp, pre, m.layers[il]);
        bind_ffn(b, hp, pre, m.layers[il]);
    }
}

// llama_ftype names, as llama.cpp prints them.
std::string ftype_name(int64_t ft) {
    static const std::map<int64_t, const char*> names = {
        {0, "all F32"},  {1, "F16"},      {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
        {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
        {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
        {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"}, {22, "IQ3_XS"},
        {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"}, {26, "IQ3_S"},  {27, "IQ3_M"},
        {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"}, {31, "IQ1_M"},  {32, "BF16"},
        {36, "TQ1_0"},   {37, "TQ2_0"},
    };
    auto it = names.find(ft);
    return it != names.end() ? it->second : "file type " + std::to_string(ft);
}

std::string human_count(int64_t n) {
    char buf[32];
    if (n >= 1000000000)
        std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
    else if (n >= 1000000)
        std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
    return buf;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, int n_threads) {
    auto m = std::make_unique<Model>();
    m->file_ = GGUFFile::open(path);
    // Architecture first, so a foreign model fails with that message rather than a tokenizer one.
    const std::string arch = m->file_->get_string("general.architecture");
    if (arch != "llama" && arch != "qwen2") {
        fail(path, ": unsupported architecture '", arch, "' (supported: llama, qwen2)");
    }
    m->tok_ = Tokenizer::from_gguf(*m->file_);
    m->hp_ = read_hparams(*m->file_, m->tok_->n_vocab());
    bind_weights(*m->file_, m->hp_, *m);
    const char* repack_env = std::getenv("SPECULA_REPACK");
    if (!repack_env || std::string_view(repack_env) != "0") pack_weights(*m, n_threads);
    m->offload = offload_defaults().target;
    return m;
}

int64_t Model::n_params() const {
    int64_t n = 0;
    for (const auto& t : file_->tensors()) n += t.n_elements();
    return n;
}

int64_t Model::bytes_per_token() const {
    auto bytes = [](const WeightView& w) {
        return w.data ? static_cast<int64_t>(w.row_bytes()) * w.rows : int64_t{0};
    };
    int64_t n = bytes(output);
    for (const LayerWeights& l : layers) {
        n += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo);
        n += bytes(l.ffn_gate) + bytes(l.ffn_up) + bytes(l.ffn_down);
        const int64_t experts =
            bytes(l.ffn_gate_exps) + bytes(l.ffn_up_exps) + bytes(l.ffn_down_exps);
        if (hp_.n_expert > 0) n += experts * hp_.n_expert_used / hp_.n_expert;
    }
    return n;
}

std::string Model::describe() const {
    std::ostringstream os;
    os << arch_name(hp_.arch) << " " << human_count(n_params()) << " params, ";
    if (file_->has("general.file_type")) {
        os << ftype_name(file_->get_int("general.file_type"));
    } else {
        os << type_name(layers.empty() ? tok_embd.type : layers[0].wq.type) << " weights";
    }
    os << ", " << hp_.n_layer << " layers, n_embd " << hp_.n_embd;
    if (hp_.n_expert > 0) os << ", " << hp_.n_expert << "x" << hp_.n_expert_used << " experts";
    return os.str();
}

}  // namespace specula
