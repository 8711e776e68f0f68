// Gemma4Assistant: loading an assistant and fitting it to its target. The step is
// gemma4_assistant_forward.cpp.
#include "speculative/drafters/gemma4_assistant_head.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "model/load/arch.h"

namespace specula {

namespace {

// ik_llama.cpp's two spellings: the key naming the target's hidden size and the projections.
struct Schema {
    const char* arch;
    const char* backbone_key;
    const char* pre_proj;
    const char* post_proj;
};
constexpr Schema kSchemas[] = {
    {"gemma4-assistant", "embedding_length_out", "nextn.pre_projection.weight",
     "nextn.post_projection.weight"},
    {"gemma4_mtp", "backbone_embedding_length", "mtp_pre_proj.weight", "mtp_post_proj.weight"},
};

const Schema* find_schema(const std::string& arch) {
    for (const Schema& s : kSchemas)
        if (arch == s.arch) return &s;
    return nullptr;
}

const Schema& read_hparams(Gemma4Assistant& a, const Model& target) {
    const GGUFFile& f = *a.file;
    const std::string arch = f.get_string_or("general.architecture", "");
    const Schema* s = find_schema(arch);
    if (!s)
        fail(f.path(), ": key 'general.architecture' is '", arch,
             "', Gemma 4's assistant is 'gemma4-assistant' or 'gemma4_mtp'");
    if (target.hparams().arch != "gemma4")
        fail(f.path(), ": Gemma 4's assistant drafts for a gemma4 target; ", target.file().path(),
             " is '", target.hparams().arch, "'");
    HParams& hp = a.hp;
    hp.arch = arch;
    read_base_hparams(f, hp, /*per_layer=*/true);
    read_attention_hparams(f, hp, /*per_layer=*/true);
    read_sliding_window(f, hp, -1);
    read_swa_flags(f, hp);
    hp.head_dim_swa = read_int(f, arch + ".attention.key_length_swa", hp.head_dim, 1, 1 << 16);
    const std::string key = arch + "." + s->backbone_key;
    a.n_backbone = read_int(f, key, -1, 1, 1 << 16);
    const int td = target.hparams().n_embd;
    if (a.n_backbone != td)
        fail(f.path(), ": key '", key, "' is ", a.n_backbone, ", the hidden size of ",
             target.file().path(), " is ", td);
    return *s;
}

// The target layer, attention shape and rope of assistant layer il; refused naming the key and
// both files when the target's cache layer does not fit.
void fit_layer(Gemma4Assistant& a, int il, const float* rope_freqs) {
    const HParams &hp = a.hp, &thp = a.target->hparams();
    const std::string& path = a.file->path();
    const std::string& tpath = a.target->file().path();
    const bool swa = hp.is_swa(il);
    const char* kind = swa ? "sliding-window" : "full-attention";
    const int kv = kv_source_layer_for(a.target->arch(), thp, swa);
    if (kv < 0)
        fail(path, ": layer ", il, " (", kind, ", key '", hp.arch,
             ".attention.sliding_window_pattern') reads the target's last ", kind,
             " layer with a KV cache of its own, and ", tpath, " has none");
    const int hd = hp.layer_head_dim(il), thd = thp.layer_head_dim(kv);
    if (hd != thd)
        fail(path, ": key '", hp.arch, swa ? ".attention.key_length_swa" : ".attention.key_length",
             "' is ", hd, " (layer ", il, "), target layer ", kv, " of ", tpath, " has heads of ",
             thd);
    const int nkv = hp.layer_n_head_kv(il), tnkv = thp.layer_n_head_kv(kv);
    if (nkv != tnkv)
        fail(path, ": key '", hp.arch, ".attention.head_count_kv' is ", nkv, " for layer ", il,
             ", target layer ", kv, " of ", tpath, " has ", tnkv, " KV heads");
    Gemma4AssistantLayer& l = a.layers[size_t(il)];
    l.kv_layer = kv;
    l.att.n_head = hp.layer_n_head(il);
    l.att.n_head_kv = nkv;
    l.att.head_dim = hd;
    l.att.scale = 1.0f;  // the Q/K norms set the scale
    // The query sits at L with rows up to L - 1 cached: attention() at L - 1 with a window one
    // shorter sees rows L - w + 1 .. L - 1, the rows ik_llama.cpp's mask leaves it (L - p < w).
    l.att.window = swa ? hp.n_swa - 1 : 0;
    RopeParams& r = l.rope;
    r.neox = true;
    r.n_rot = swa && thp.n_rot_swa > 0 ? thp.n_rot_swa : thp.n_rot;
    r.freq_base = swa ? thp.rope_freq_base_swa : thp.rope_freq_base;
    r.freq_scale = swa ? thp.rope_freq_scale_swa : thp.rope_freq_scale;
    r.freq_factors = swa ? nullptr : rope_freqs;
}

void check_window(const Gemma4Assistant& a) {
    const HParams &hp = a.hp, &thp = a.target->hparams();
    if (!hp.any_swa()) return;
    if (hp.n_swa < 2 || hp.n_swa > thp.n_swa)
        fail(a.file->path(), ": key '", hp.arch, ".attention.sliding_window' is ", hp.n_swa,
             "; it must be in 2 .. ", thp.n_swa, ", the window of ", a.target->file().path(),
             " (whose sliding-window cache keeps no older rows)");
}

void bind_layer(Gemma4Assistant& a, TensorBinder& b, int il) {
    const HParams& hp = a.hp;
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t d = hp.n_embd, dq = hp.layer_n_embd_q(il), ff = hp.layer_n_ff(il);
    Gemma4AssistantLayer& l = a.layers[size_t(il)];
    l.attn_norm = b.vector(p + "attn_norm.weight", d);
    l.wq = b.matrix(p + "attn_q.weight", {d, dq});
    l.q_norm = b.vector(p + "attn_q_norm.weight", hp.layer_head_dim(il));
    l.wo = b.matrix(p + "attn_output.weight", {dq, d});
    l.attn_post_norm = b.vector(p + "post_attention_norm.weight", d);
    l.ffn_norm = b.vector(p + "ffn_norm.weight", d);
    l.ffn_gate = b.matrix(p + "ffn_gate.weight", {d, ff});
    l.ffn_up = b.matrix(p + "ffn_up.weight", {d, ff});
    l.ffn_down = b.matrix(p + "ffn_down.weight", {ff, d});
    l.ffn_post_norm = b.vector(p + "post_ffw_norm.weight", d);
    l.out_scale = b.vector(p + "layer_output_scale.weight", 1, Need::Optional);
}

// The output matrix: output_extra (ik_llama.cpp's cheaper copy), else output, else the tied
// token_embd; its rows must be the target's vocabulary.
void bind_output(Gemma4Assistant& a, TensorBinder& b) {
    const GGUFFile& f = *a.file;
    const int nv = a.target->hparams().n_vocab;
    const char* name = "token_embd.weight";
    for (const char* n : {"output_extra.weight", "output.weight"})
        if (f.find_tensor(n)) {
            name = n;
            break;
        }
    const GGUFTensor* t = f.find_tensor(name);
    if (!t) fail(f.path(), ": missing tensor '", name, "'");
    if (t->ne.size() != 2 || t->ne[1] != nv)
        fail(f.path(), ": tensor '", name, "' has ", t->ne.size() == 2 ? t->ne[1] : 0,
             " rows, the vocabulary of ", a.target->file().path(), " has ", nv, " tokens");
    a.output = b.matrix(name, {a.hp.n_embd, nv});
    a.hp.n_vocab = nv;
}

}  // namespace

bool Gemma4Assistant::is_assistant_file(const std::string& path) {
    try {
        const auto f = GGUFFile::open(path);
        return find_schema(f->get_string_or("general.architecture", "")) != nullptr;
    } catch (const Error&) {
        return false;  // whoever loads it next names what is wrong with it
    }
}

std::unique_ptr<Gemma4Assistant> Gemma4Assistant::load(const std::string& path,
                                                       const Model& target) {
    auto a = std::make_unique<Gemma4Assistant>();
    a->file = GGUFFile::open(path);
    a->target = &target;
    const Schema& s = read_hparams(*a, target);
    check_window(*a);
    TensorBinder b(*a->file, a->owned);
    const int64_t d = a->hp.n_embd, nb = a->n_backbone;
    bind_output(*a, b);
    a->output_norm = b.vector("output_norm.weight", d);
    a->pre_proj = b.matrix(s.pre_proj, {2 * nb, d});
    a->post_proj = b.matrix(s.post_proj, {d, nb});
    const int n_rot = target.hparams().n_rot;
    const float* freqs = b.vector("rope_freqs.weight", n_rot / 2, Need::Optional);
    a->layers.resize(size_t(a->hp.n_layer));
    for (int il = 0; il < a->hp.n_layer; ++il) {
        fit_layer(*a, il, freqs);
        bind_layer(*a, b, il);
    }
    return a;
}

}  // namespace specula
