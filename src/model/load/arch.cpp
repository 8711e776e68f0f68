// The registry table (see arch.h).
#include "model/load/arch.h"

#include <algorithm>

#include "common/error.h"

namespace specula {

namespace {

const ArchSpec* const kArchs[] = {&kLlamaArch,     &kQwen2Arch,    &kQwen3Arch,    &kQwen3MoeArch,
                                  &kGemma2Arch,    &kGemma3Arch,   &kGemma4Arch,   &kGptOssArch,
                                  &kPhi3Arch,      &kMistral3Arch, &kQwen35Arch,   &kQwen35MoeArch,
                                  &kDeepseek2Arch, &kGlm4MoeArch,  &kNemotronHArch};

}  // namespace

std::span<const ArchSpec* const> archs() {
    return kArchs;
}

const ArchSpec& find_arch(std::string_view name, const std::string& path) {
    std::string list;
    for (const ArchSpec* a : kArchs) {
        if (name == a->name) return *a;
        list += (list.empty() ? "" : ", ") + std::string(a->name);
    }
    fail(path, ": unsupported architecture '", name, "' (supported: ", list, ")");
}

std::vector<int> default_capture_layers(const HParams& hp) {
    const int n = hp.n_layer;
    std::vector<int> l;
    for (int il : {2, n / 2, n - 3}) {
        il = std::clamp(il, 0, std::max(0, n - 2));  // the last layer's rows are not all kept
        if (l.empty() || il > l.back()) l.push_back(il);
    }
    return l;
}

std::vector<int> capture_layers_for(const ArchSpec& a, const HParams& hp) {
    return a.capture_layers ? a.capture_layers(hp) : default_capture_layers(hp);
}

int kv_source_layer_for(const ArchSpec& a, const HParams& hp, bool swa) {
    return a.kv_source_layer ? a.kv_source_layer(hp, swa) : default_kv_source_layer(hp, swa);
}

void bind_nextn_tensors(TensorBinder& b, const HParams& hp, const std::string& pre, MtpWeights& m) {
    const int64_t d = hp.n_embd;
    m.eh_proj = b.matrix(pre + "nextn.eh_proj.weight", {2 * d, d});
    m.enorm = b.vector(pre + "nextn.enorm.weight", d);
    m.hnorm = b.vector(pre + "nextn.hnorm.weight", d);
    m.shared_head_norm = b.vector(pre + "nextn.shared_head_norm.weight", d, Need::Optional);
    m.head = b.matrix(pre + "nextn.shared_head_head.weight", {d, hp.n_vocab}, Need::Optional);
    if (!m.head.data) m.head = b.matrix("output_extra.weight", {d, hp.n_vocab}, Need::Optional);
    m.embed = b.matrix(pre + "nextn.embed_tokens.weight", {d, hp.n_vocab}, Need::Optional);
}

int default_kv_source_layer(const HParams& hp, bool swa) {
    for (int il = hp.n_layer - 1; il >= 0; --il)
        if (!hp.is_recurrent(il) && hp.own_kv(il) && hp.is_swa(il) == swa) return il;
    return -1;
}

}  // namespace specula
