// mem_available_bytes / plan_memory / describe / check_memory: see memory_plan.h.
#include "cli/memory_plan.h"

#include <fstream>
#include <sstream>

#include "cli/cli_util.h"
#include "common/error.h"
#include "model/attention.h"

namespace specula::cli {

namespace {

double weight_bytes(const Model& m) {
    double b = 0;
    for (const GGUFTensor& t : m.file().tensors()) b += double(t.nbytes);
    return b;
}

// The cache and the attention scores scratch that grows with it.
double kv_bytes(const Model& m, int n_ctx, int n_threads, KVType k, KVType v) {
    const HParams& hp = m.hparams();
    const AttentionShape s{hp.n_head, hp.n_head_kv, hp.head_dim, 1.f};
    return KVCache::bytes(hp.n_layer, n_ctx, hp.n_embd_kv(), k, v) +
           sizeof(float) * double(attention_scratch_floats(s, n_ctx, n_threads));
}

std::string fmt(double bytes) {
    return format_bytes(static_cast<uint64_t>(bytes));
}

}  // namespace

double mem_available_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    double kib = 0;
    std::string unit;
    while (f >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return 0;
}

MemoryPlan plan_memory(const Model& target, const Model* draft, int n_ctx, int n_threads,
                       KVType type_k, KVType type_v, double available) {
    MemoryPlan p;
    p.target_weights = weight_bytes(target);
    p.target_kv = kv_bytes(target, n_ctx, n_threads, type_k, type_v);
    if (draft) {
        p.draft_weights = weight_bytes(*draft);
        p.draft_kv = kv_bytes(*draft, n_ctx, n_threads, type_k, type_v);
    }
    p.available = available;
    return p;
}

std::string describe(const MemoryPlan& p) {
    std::ostringstream s;
    s << "memory: weights " << fmt(p.target_weights) << " + KV " << fmt(p.target_kv);
    if (p.draft_weights > 0)
        s << " + draft weights " << fmt(p.draft_weights) << " + draft KV " << fmt(p.draft_kv);
    s << " = " << fmt(p.total());
    if (p.available > 0)
        s << " of " << fmt(p.available) << " available";
    else
        s << " (available memory unknown)";
    return s.str();
}

void check_memory(const MemoryPlan& p) {
    if (p.available <= 0 || p.total() <= p.available) return;
    fail("not enough memory for this run (", describe(p).substr(8), ")",
         "; use a smaller -c, -ctk q8_0 -ctv q8_0, or a smaller model");
}

}  // namespace specula::cli
