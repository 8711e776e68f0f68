// Model::attach_mtp_sidecar: the MTP head from an MTP-only GGUF (model.h's
// LoadOptions::mtp_sidecar). The sidecar is read with the target's architecture; every hparam the
// head's shapes or placement depend on must equal the target's (an Error names the key and both
// files), then the architecture's bind_mtp binds blk.(block_count - 1).* from the sidecar with
// the target's hparams (TensorBinder names a missing or misshapen tensor and the sidecar). The
// sidecar stays mapped for the model's lifetime.
#include <cstdlib>
#include <set>

#include "common/error.h"
#include "model/load/arch.h"
#include "model/load/model.h"

namespace specula {

namespace {

// The block index of a "blk.N.nextn.*" tensor name, else -1.
int nextn_block(const std::string& name) {
    if (name.rfind("blk.", 0) != 0 || name.find(".nextn.") == std::string::npos) return -1;
    char* end = nullptr;
    const long il = std::strtol(name.c_str() + 4, &end, 10);
    return end && *end == '.' && il >= 0 && il < (1 << 20) ? int(il) : -1;
}

// The sidecar's vocabulary size and the key it comes from (0 when it says none).
std::pair<int64_t, std::string> vocab_size(const GGUFFile& f, const std::string& arch) {
    if (const GGUFValue* v = f.find("tokenizer.ggml.tokens"))
        return {int64_t(v->arr.size()), "tokenizer.ggml.tokens"};
    const std::string key = arch + ".vocab_size";
    if (f.has(key)) return {f.get_int(key), key};
    return {0, ""};
}

}  // namespace

void Model::attach_mtp_sidecar(const std::string& path) {
    std::unique_ptr<GGUFFile> f = GGUFFile::open(path);
    const std::string& target = file_->path();
    const std::string arch = f->get_string_or("general.architecture", "");
    if (arch != hp_.arch) {
        fail(path, ": key 'general.architecture' = '", arch, "' does not fit the target ", target,
             " ('", hp_.arch, "'): an MTP sidecar has the target's architecture");
    }
    if (!arch_->bind_mtp) {
        fail(path, ": ", arch, " has no MTP (nextn) head Specula runs (qwen35, qwen35moe)");
    }
    const std::string p = arch + ".";
    HParams s;
    s.arch = hp_.arch;
    s.n_vocab = hp_.n_vocab;
    arch_->read(*f, s);
    auto same = [&](int64_t got, int64_t want, const std::string& key) {
        if (got != want) {
            fail(path, ": key '", key, "' = ", got, " does not fit the target ", target, " (", want,
                 "): not an MTP sidecar of this model");
        }
    };
    same(s.n_embd, hp_.n_embd, p + "embedding_length");
    const auto [n_vocab, vocab_key] = vocab_size(*f, arch);
    if (!vocab_key.empty()) same(n_vocab, hp_.n_vocab, vocab_key);
    if (s.n_nextn == 0) {
        fail(path, ": key '", p, "nextn_predict_layers' is 0 or missing: not an MTP sidecar (no ",
             "nextn layer) for ", target);
    }
    std::set<int> blocks;
    for (const GGUFTensor& t : f->tensors())
        if (const int il = nextn_block(t.name); il >= 0) blocks.insert(il);
    if (blocks.empty()) {
        fail(path, ": no blk.N.nextn.* tensors: not an MTP sidecar (key '", p,
             "nextn_predict_layers' = ", s.n_nextn, ") for ", target);
    }
    const int head = s.n_layer + s.n_nextn - 1;  // block_count - 1
    if (s.n_layer != hp_.n_layer) {
        fail(path, ": key '", p, "block_count' = ", head + 1,
             " with nextn_predict_layers = ", s.n_nextn, " puts the MTP layer after ", s.n_layer,
             " main layers, but the target ", target, " has ", hp_.n_layer, " (block_count ",
             hp_.n_layer + s.n_nextn, " would fit)");
    }
    if (!blocks.count(head)) {
        fail(path, ": the nextn tensors are at blk.", *blocks.rbegin(), ", but key '", p,
             "block_count' = ", head + 1, " puts the MTP layer at blk.", head);
    }
    // The head's shapes and arithmetic follow these; the binder checks the tensors against them.
    same(s.n_head, hp_.n_head, p + "attention.head_count");
    same(s.n_head_kv, hp_.n_head_kv, p + "attention.head_count_kv");
    same(s.head_dim, hp_.head_dim, p + "attention.key_length");
    same(s.n_rot, hp_.n_rot, p + "rope.dimension_count");
    same(s.n_ff, hp_.n_ff, p + "feed_forward_length");
    same(s.n_expert, hp_.n_expert, p + "expert_count");
    same(s.n_expert_used, hp_.n_expert_used, p + "expert_used_count");

    mtp = MtpWeights{};  // the sidecar's head replaces the file's own
    HParams h = hp_;
    h.n_nextn = s.n_nextn;
    TensorBinder b(*f, *this);
    arch_->bind_mtp(b, h, *this);
    hp_.n_nextn = s.n_nextn;
    mtp_file_ = std::move(f);
}

}  // namespace specula
