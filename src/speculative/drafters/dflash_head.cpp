// DFlashHead: loading and fitting a DFlash drafter to its target. The forward pass is
// dflash_forward.cpp.
#include "speculative/drafters/dflash_head.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace specula {

namespace {

constexpr const char* kArch = "dflash-draft";
constexpr const char* kBlockKey = "dflash-draft.dflash.block_size";
constexpr const char* kMaskKey = "dflash-draft.dflash.mask_token_id";
constexpr const char* kLayersKey = "dflash-draft.dflash.target_layer_ids";
constexpr const char* kFeaturesKey = "dflash-draft.dflash.n_target_features";
constexpr const char* kBackboneKey = "dflash-draft.dflash.backbone_rotary_base";
constexpr int kMaxLayers = 8;
constexpr int kMaxBlock = 65;  // the longest draft is 64 (--draft)

// Keys and tensors of variants this forward does not run: refused rather than ignored.
void refuse_variants(const GGUFFile& f) {
    if (f.get_bool_or("dflash-draft.dflash.laguna", false))
        fail(f.path(),
             ": key 'dflash-draft.dflash.laguna' is set: Laguna DFlash drafters are "
             "not supported");
    if (f.has("dflash-draft.attention.sliding_window"))
        fail(f.path(),
             ": key 'dflash-draft.attention.sliding_window': DFlash drafters with "
             "sliding-window attention are not supported");
    for (const char* t :
         {"markov_w1.weight", "blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias",
          "blk.0.attn_output.bias", "blk.0.attn_sinks.weight", "blk.0.attn_gate.weight"}) {
        if (f.find_tensor(t))
            fail(f.path(), ": tensor '", t,
                 "': this DFlash variant (DSpark heads, attention "
                 "biases, sinks or gates) is not supported");
    }
}

// The drafter's hyperparameters and their fit with the target.
void read_hparams(DFlashHead& h, const Model& target) {
    const GGUFFile& f = *h.file;
    const std::string arch = f.get_string_or("general.architecture", "");
    if (arch != kArch)
        fail(f.path(), ": key 'general.architecture' is '", arch, "', a DFlash drafter's is '",
             kArch, "'");
    refuse_variants(f);
    h.hp.arch = kArch;
    read_base_hparams(f, h.hp);
    read_attention_hparams(f, h.hp);
    read_rope_hparams(f, h.hp, false);
    const HParams& th = target.hparams();
    if (h.hp.n_embd != th.n_embd)
        fail(f.path(), ": key '", kArch, ".embedding_length' is ", h.hp.n_embd,
             ", the hidden size of ", target.file().path(), " is ", th.n_embd);
    const int64_t block = f.get_int_or(kBlockKey, 16);  // ik_llama.cpp's default
    if (block < 2 || block > kMaxBlock)
        fail(f.path(), ": key '", kBlockKey, "' is ", block, " (2..", kMaxBlock,
             " expected: a block proposes block_size - 1 tokens)");
    h.block_size = int(block);
    const int64_t mask = f.get_int_or(kMaskKey, 0);
    if (mask < 0 || mask >= th.n_vocab)
        fail(f.path(), ": key '", kMaskKey, "' is ", mask, ", outside the vocabulary of ",
             target.file().path(), " (", th.n_vocab, " tokens)");
    h.mask_token = token_id(mask);
    if (f.has("tokenizer.ggml.tokens")) {
        const int64_t nv = int64_t(f.get_string_array("tokenizer.ggml.tokens").size());
        if (nv != th.n_vocab)
            fail(f.path(), ": key 'tokenizer.ggml.tokens' has ", nv, " tokens, the vocabulary of ",
                 target.file().path(), " has ", th.n_vocab);
    }
    const float backbone = float(f.get_float_or(kBackboneKey, 0.0));
    h.rope.n_rot = h.hp.n_rot;
    h.rope.neox = true;
    h.rope.freq_base = h.hp.rope_freq_base;
    h.rope.freq_scale = h.hp.rope_freq_scale;
    h.rope_ctx = h.rope;
    if (backbone > 0.0f) h.rope_ctx.freq_base = backbone;
    h.att.n_head = h.hp.n_head;
    h.att.n_head_kv = h.hp.n_head_kv;
    h.att.head_dim = h.hp.head_dim;
    h.att.scale = 1.0f / std::sqrt(float(h.hp.head_dim));
}

// The target layers the drafter names, checked against the target; fills capture / column.
void read_layers(DFlashHead& h, const Model& target) {
    const GGUFFile& f = *h.file;
    if (!f.has(kLayersKey))
        fail(f.path(), ": a DFlash drafter names the target layers it reads: key '", kLayersKey,
             "' is missing");
    h.layers = f.get_int_array(kLayersKey);
    const int n = target.hparams().n_layer;
    if (h.layers.empty() || int(h.layers.size()) > kMaxLayers)
        fail(f.path(), ": key '", kLayersKey, "' has ", h.layers.size(), " layer ids (1..",
             kMaxLayers, " expected)");
    for (int L : h.layers) {
        if (L < 0 || L > n - 2)
            fail(f.path(), ": key '", kLayersKey, "' names target layer ", L, ", outside 0..",
                 n - 2, " of ", target.file().path(), " (", n,
                 " layers; the last one keeps only its output rows)");
        if (std::count(h.layers.begin(), h.layers.end(), L) > 1)
            fail(f.path(), ": key '", kLayersKey, "' lists target layer ", L, " twice");
    }
    h.capture = h.layers;
    std::sort(h.capture.begin(), h.capture.end());
    for (int L : h.layers)
        h.column.push_back(
            int(std::lower_bound(h.capture.begin(), h.capture.end(), L) - h.capture.begin()));
    const int64_t nf = f.get_int_or(kFeaturesKey, 0);
    if (nf != h.n_features())
        fail(f.path(), ": key '", kFeaturesKey, "' is ", nf, "; ", h.layers.size(),
             " target layers of ", target.file().path(), " give ", h.n_features(), " (",
             h.layers.size(), " x its hidden size ", target.hparams().n_embd, ")");
}

void bind_layer(DFlashHead& h, TensorBinder& b, int il) {
    const HParams& hp = h.hp;
    const int64_t d = hp.n_embd;
    const std::string p = "blk." + std::to_string(il) + ".";
    DFlashLayer& l = h.blk[size_t(il)];
    l.attn_norm = b.vector(p + "attn_norm.weight", d);
    l.wq = b.matrix(p + "attn_q.weight", {d, hp.n_embd_q()});
    l.wk = b.matrix(p + "attn_k.weight", {d, hp.n_embd_kv()});
    l.wv = b.matrix(p + "attn_v.weight", {d, hp.n_embd_kv()});
    l.wo = b.matrix(p + "attn_output.weight", {hp.n_embd_q(), d});
    l.q_norm = b.vector(p + "attn_q_norm.weight", hp.head_dim);
    l.k_norm = b.vector(p + "attn_k_norm.weight", hp.head_dim);
    l.post_norm = b.vector(p + "post_attention_norm.weight", d);
    l.ffn_gate = b.matrix(p + "ffn_gate.weight", {d, hp.n_ff});
    l.ffn_up = b.matrix(p + "ffn_up.weight", {d, hp.n_ff});
    l.ffn_down = b.matrix(p + "ffn_down.weight", {hp.n_ff, d});
}

void bind_tensors(DFlashHead& h, const Model& target) {
    const GGUFFile& f = *h.file;
    const int64_t d = h.hp.n_embd;
    const int nv = target.hparams().n_vocab;
    TensorBinder b(f, h.owned);
    h.fc = b.matrix("dflash_fc.weight", {h.n_features(), d});
    h.hidden_norm = b.vector("dflash_hidden_norm.weight", d);
    h.output_norm = b.vector("output_norm.weight", d);
    h.blk.resize(size_t(h.hp.n_layer));
    for (int il = 0; il < h.hp.n_layer; ++il) bind_layer(h, b, il);
    // Own token_embd / output must cover the target's vocabulary (the drafts are target ids).
    const auto own = [&](const char* name, const WeightView& theirs) {
        const GGUFTensor* t = f.find_tensor(name);
        if (!t) return theirs;
        WeightView w = b.matrix(name, {d, t->ne.size() == 2 ? t->ne[1] : 0});
        if (w.rows != nv)
            fail(f.path(), ": tensor '", name, "' has ", w.rows, " rows, the vocabulary of ",
                 target.file().path(), " has ", nv, " tokens");
        return w;
    };
    h.embed = own("token_embd.weight", target.tok_embd);
    h.output = own("output.weight", target.output);
}

// The drafter's own dense matrices repacked (pack_head_weights).
void pack(DFlashHead& h) {
    std::vector<WeightView*> ws = {&h.fc, &h.output};
    for (DFlashLayer& l : h.blk)
        for (WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
            ws.push_back(w);
    pack_head_weights(ws, *h.target, h.packed);
}

}  // namespace

std::unique_ptr<DFlashHead> DFlashHead::load(const std::string& path, const Model& target) {
    auto h = std::make_unique<DFlashHead>();
    h->file = GGUFFile::open(path);
    h->target = &target;
    read_hparams(*h, target);
    read_layers(*h, target);
    bind_tensors(*h, target);
    pack(*h);
    return h;
}

}  // namespace specula
