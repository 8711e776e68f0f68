// drafter_memory: see drafter_memory.h.
#include "speculative/drafter_memory.h"

#include "speculative/drafters/suffix_tree.h"

namespace specula {

double head_weight_bytes(const GGUFFile& file, const std::vector<PackedBuffer>& packed,
                         const ModelWeights& owned) {
    double b = 0;
    for (const GGUFTensor& t : file.tensors()) b += double(t.nbytes);
    for (const PackedBuffer& p : packed) b += double(p.size());
    for (const std::vector<float>& v : owned.owned) b += sizeof(float) * double(v.size());
    return b;
}

std::vector<DrafterPart> drafter_memory(const SpeculativeSetup& setup, int n_ctx, KVType type_k,
                                        KVType type_v) {
    std::vector<DrafterPart> parts;
    if (const Eagle3Head* h = setup.eagle3.get()) {
        parts.push_back({"EAGLE-3 head", head_weight_bytes(*h->file, h->packed, h->owned), false});
        parts.push_back(
            {"EAGLE-3 head KV", KVCache::bytes(1, n_ctx, h->hp.n_embd_kv(), type_k, type_v), true});
    }
    if (const MedusaHeads* m = setup.medusa.get())
        parts.push_back({"Medusa heads", head_weight_bytes(*m->file, {}, m->owned), false});
    if (setup.suffix_cache) {
        const SuffixParams& p = setup.config.suffix;
        parts.push_back({"suffix cache", double(p.cache_bytes), false});
        parts.push_back(
            {"suffix tree", double(SuffixTree::bytes_per_token(p.max_depth)) * n_ctx, true});
    }
    return parts;
}

}  // namespace specula
