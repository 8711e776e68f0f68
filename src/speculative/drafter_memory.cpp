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
    if (const DFlashHead* h = setup.dflash.get()) {
        // Its cache: the context plus one block, every layer (DFlashDrafter's).
        parts.push_back(
            {"DFlash drafter", head_weight_bytes(*h->file, h->packed, h->owned), false});
        parts.push_back({"DFlash drafter KV",
                         KVCache::bytes(h->hp.n_layer, n_ctx + h->block_size, h->hp.n_embd_kv(),
                                        type_k, type_v),
                         true});
    }
    if (const Gemma4Assistant* a = setup.gemma4_assistant.get())  // no cache: the target's
        parts.push_back({"Gemma 4 assistant", head_weight_bytes(*a->file, {}, a->owned), false});
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
