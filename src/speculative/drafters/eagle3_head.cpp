// Eagle3Head: loading and fitting a head to its target. The forward pass is eagle3_forward.cpp.
#include "speculative/drafters/eagle3_head.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"

namespace specula {

namespace {

constexpr const char* kLayersKey = "eagle3.target_layers";
constexpr const char* kOldLayersKey = "eagle3.extract_layers";
constexpr int kMaxLayers = 8;

// The layer ids the head names, checked against the target's layer count; fills capture / column.
void read_layers(Eagle3Head& h, const Model& target) {
    const GGUFFile& f = *h.file;
    const char* key = f.has(kLayersKey) ? kLayersKey : kOldLayersKey;
    if (!f.has(key)) {
        fail(f.path(), ": an EAGLE-3 head names the target layers it reads: key '", kLayersKey,
             "' (or the older '", kOldLayersKey, "') is missing");
    }
    h.layers = f.get_int_array(key);
    const int n = target.hparams().n_layer;
    if (h.layers.empty() || int(h.layers.size()) > kMaxLayers)
        fail(f.path(), ": key '", key, "' has ", h.layers.size(), " layer ids (1..", kMaxLayers,
             " expected)");
    for (int L : h.layers) {
        if (L < 1 || L > n - 1) {
            fail(f.path(), ": key '", key, "' names target layer ", L, ", outside 1..", n - 1,
                 " of ", target.file().path(), " (", n,
                 " layers; the head reads the input of each named layer, the output of the one "
                 "before)");
        }
        h.capture.push_back(L - 1);
    }
    std::sort(h.capture.begin(), h.capture.end());
    h.capture.erase(std::unique(h.capture.begin(), h.capture.end()), h.capture.end());
    for (int L : h.layers)
        h.column.push_back(
            int(std::lower_bound(h.capture.begin(), h.capture.end(), L - 1) - h.capture.begin()));
}

// The d2t mapping (absent: the head's output rows are target ids), checked against the target.
void read_d2t(Eagle3Head& h, const Model& target) {
    const GGUFFile& f = *h.file;
    const GGUFTensor* t = f.find_tensor("d2t");
    const int nv = target.hparams().n_vocab;
    if (!t) {
        if (h.output.rows != nv) {
            fail(f.path(), ": the head's vocabulary (", h.output.rows,
                 " output rows) is not the target's (", nv, " tokens in ", target.file().path(),
                 ") and the head has no d2t tensor mapping it");
        }
        return;
    }
    if (t->ne.size() != 1 || (t->type != GGMLType::I64 && t->type != GGMLType::I32))
        fail(f.path(), ": tensor 'd2t' must be a vector of I64 or I32 target token ids");
    if (t->ne[0] != h.output.rows) {
        fail(f.path(), ": tensor 'd2t' has ", t->ne[0], " entries, the head's output ",
             h.output.rows, " rows");
    }
    h.d2t.resize(size_t(t->ne[0]));
    for (size_t i = 0; i < h.d2t.size(); ++i) {
        int64_t id = 0;
        if (t->type == GGMLType::I64)
            std::memcpy(&id, t->data + 8 * i, 8);
        else {
            int32_t v = 0;
            std::memcpy(&v, t->data + 4 * i, 4);
            id = v;
        }
        if (id < 0 || id >= nv) {
            fail(f.path(), ": tensor 'd2t' maps head token ", i, " to ", id,
                 ", outside the vocabulary of ", target.file().path(), " (", nv, " tokens)");
        }
        h.d2t[i] = int32_t(id);
    }
}

// The head's hyperparameters (llama keys under "eagle3.") and their fit with the target.
void read_hparams(Eagle3Head& h, const Model& target) {
    const GGUFFile& f = *h.file;
    const std::string arch = f.get_string_or("general.architecture", "");
    if (arch != "eagle3")
        fail(f.path(), ": key 'general.architecture' is '", arch,
             "', an EAGLE-3 head's is 'eagle3'");
    h.hp.arch = "eagle3";
    read_base_hparams(f, h.hp);
    read_attention_hparams(f, h.hp);
    read_rope_hparams(f, h.hp);
    if (h.hp.n_layer != 1)
        fail(f.path(), ": key 'eagle3.block_count' is ", h.hp.n_layer, "; an EAGLE-3 head has 1");
    const int td = target.hparams().n_embd;
    h.target_embd = int(f.get_int_or("eagle3.target_hidden_size", h.hp.n_embd));
    if (h.target_embd != td) {
        fail(f.path(), ": key 'eagle3.target_hidden_size' is ", h.target_embd, " (",
             f.has("eagle3.target_hidden_size") ? "given" : "the head's embedding_length",
             "), the hidden size of ", target.file().path(), " is ", td);
    }
    h.norm_before_residual = f.get_bool_or("eagle3.norm_before_residual", false);
}

void bind_tensors(Eagle3Head& h, const Model& target) {
    const GGUFFile& f = *h.file;
    const HParams& hp = h.hp;
    TensorBinder b(f, h.owned);
    const int64_t d = hp.n_embd, d2 = 2 * d;
    h.fc = b.matrix("fc.weight", {int64_t(h.layers.size()) * h.target_embd, d});
    h.attn_norm = b.vector("blk.0.attn_norm.weight", d);
    h.hidden_norm = f.find_tensor("blk.0.hidden_norm.weight")
                        ? b.vector("blk.0.hidden_norm.weight", d)
                        : b.vector("blk.0.attn_norm_2.weight", d);
    h.wq = b.matrix("blk.0.attn_q.weight", {d2, hp.n_embd_q()});
    h.wk = b.matrix("blk.0.attn_k.weight", {d2, hp.n_embd_kv()});
    h.wv = b.matrix("blk.0.attn_v.weight", {d2, hp.n_embd_kv()});
    h.wo = b.matrix("blk.0.attn_output.weight", {hp.n_embd_q(), d});
    h.ffn_norm = b.vector("blk.0.ffn_norm.weight", d);
    h.ffn_gate = b.matrix("blk.0.ffn_gate.weight", {d, hp.n_ff});
    h.ffn_up = b.matrix("blk.0.ffn_up.weight", {d, hp.n_ff});
    h.ffn_down = b.matrix("blk.0.ffn_down.weight", {hp.n_ff, d});
    h.output_norm = b.vector("output_norm.weight", d);
    const int nv = target.hparams().n_vocab;
    const bool same_width = d == target.hparams().n_embd;
    const auto borrow = [&](const char* name) {
        if (!same_width) {
            fail(f.path(), ": the head has no '", name, "' of its own and its embedding_length (",
                 d, ") is not the hidden size of ", target.file().path(), " (",
                 target.hparams().n_embd, ") whose '", name, "' it would use");
        }
    };
    const GGUFTensor* e = f.find_tensor("token_embd.weight");
    if (e) {
        h.embed = b.matrix("token_embd.weight", {d, e->ne.size() == 2 ? e->ne[1] : 0});
        if (h.embed.rows != nv)
            fail(f.path(), ": tensor 'token_embd.weight' has ", h.embed.rows,
                 " rows, the vocabulary of ", target.file().path(), " has ", nv, " tokens");
    } else {
        borrow("token_embd.weight");
        h.embed = target.tok_embd;
    }
    const GGUFTensor* o = f.find_tensor("output.weight");
    if (o) {
        h.output = b.matrix("output.weight", {d, o->ne.size() == 2 ? o->ne[1] : 0});
    } else {
        borrow("output.weight");
        h.output = target.output;
    }
    const float* freqs = b.vector("rope_freqs.weight", hp.n_rot / 2, Need::Optional);
    h.rope.n_rot = hp.n_rot;
    h.rope.neox = false;  // llama's (adjacent pairs), as llama.cpp rotates an eagle3 head
    h.rope.freq_base = hp.rope_freq_base;
    h.rope.freq_scale = hp.rope_freq_scale;
    h.rope.freq_factors = freqs;
    if (hp.rope_yarn) {
        h.rope.ext_factor = 1.0f;
        rope_yarn_corr_dims(hp.n_rot, hp.n_ctx_orig, hp.rope_freq_base, hp.rope_yarn_beta_fast,
                            hp.rope_yarn_beta_slow, h.rope.corr_dims);
    }
    h.rope.attn_factor = hp.rope_attn_factor;
    h.att.n_head = hp.n_head;
    h.att.n_head_kv = hp.n_head_kv;
    h.att.head_dim = hp.head_dim;
    h.att.scale = 1.0f / std::sqrt(float(hp.head_dim));
}

// The head's own dense matrices repacked (pack_head_weights).
void pack(Eagle3Head& h) {
    WeightView* const ws[] = {&h.fc,       &h.wq,     &h.wk,       &h.wv,    &h.wo,
                              &h.ffn_gate, &h.ffn_up, &h.ffn_down, &h.output};
    pack_head_weights(ws, *h.target, h.packed);
}

}  // namespace

std::unique_ptr<Eagle3Head> Eagle3Head::load(const std::string& path, const Model& target) {
    auto h = std::make_unique<Eagle3Head>();
    h->file = GGUFFile::open(path);
    h->target = &target;
    read_hparams(*h, target);
    read_layers(*h, target);
    bind_tensors(*h, target);
    read_d2t(*h, target);
    pack(*h);
    return h;
}

}  // namespace specula
