// mem_available_bytes / plan_memory / describe / check_memory: see memory_plan.h.
#include "model/memory_plan.h"

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/format.h"
#include "common/threadpool.h"
#include "model/attention.h"
#include "model/recurrent_state.h"
#include "model/session.h"

namespace specula {

namespace {

double weight_bytes(const Model& m) {
    double b = 0;
    for (const GGUFTensor& t : m.file().tensors()) b += double(t.nbytes);
    if (m.mtp_file())
        for (const GGUFTensor& t : m.mtp_file()->tensors()) b += double(t.nbytes);
    return b;
}

// The cache, the attention scores scratch that grows with it, a hybrid model's recurrent state
// (model/recurrent_state.h: two copies and the inputs an exact rollback replays), and the
// one-layer cache of an MTP head (a Session of a model with the head always has it).
double kv_bytes(const Model& m, int n_ctx, int n_threads, KVType k, KVType v) {
    const HParams& hp = m.hparams();
    const AttentionShape s{hp.n_head, hp.n_head_kv, hp.head_dim, 1.f};
    std::vector<int> windows(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il)
        windows[size_t(il)] = hp.is_recurrent(il) ? -1 : hp.window(il);  // -1: no cache
    return KVCache::bytes(hp.n_layer, n_ctx, hp.n_embd_kv(), k, v, windows,
                          SessionParams::kDefaultSwaMaxPass) +
           sizeof(float) * double(attention_scratch_floats(s, n_ctx, n_threads)) +
           RecurrentState::bytes(hp) +
           (m.has_mtp() ? KVCache::bytes(1, n_ctx, hp.n_embd_kv(), k, v) : 0.0);
}

std::string fmt(double bytes) {
    return format_bytes(static_cast<uint64_t>(bytes));
}

// The device share of `m` (its Model::placement(), as a Session with the default offload uses).
DeviceShare& share_of(MemoryPlan& p, const OffloadPlan& o) {
    for (DeviceShare& d : p.devices)
        if (d.device == o.device) return d;
    DeviceShare& d = p.devices.emplace_back();
    d.device = o.device;
    d.name = o.device_name;
    d.have = o.device_bytes;
    return d;
}

void add_device_share(MemoryPlan& p, const Model& m, int n_ctx, int n_seqs, bool draft) {
    OffloadParams op = m.placement();
    op.n_ctx = n_ctx;
    const OffloadPlan o = plan_offload(m, op);
    if (o.n_layers == 0) return;
    DeviceShare& d = share_of(p, o);
    (draft ? d.draft_weights : d.target_weights) += o.weight_bytes;
    (draft ? d.draft_kv : d.target_kv) += n_seqs * o.kv_bytes;
}

std::string describe(const DeviceShare& d) {
    std::ostringstream s;
    s << "Vulkan" << d.device << " (" << d.name << "): weights " << fmt(d.target_weights)
      << " + KV " << fmt(d.target_kv);
    if (d.draft_weights > 0)
        s << " + draft weights " << fmt(d.draft_weights) << " + draft KV " << fmt(d.draft_kv);
    s << " = " << fmt(d.total());
    if (d.have > 0) s << " of " << fmt(d.have);
    return s.str();
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

MemoryPlan plan_memory(const Model& target, const Model* draft, const CachePlan& c,
                       double available) {
    if (c.n_seqs < 1) fail("plan_memory: n_seqs must be >= 1, got ", c.n_seqs);
    MemoryPlan p;
    p.n_seqs = c.n_seqs;
    const int n_ctx = resolve_ctx(target.hparams(), c.n_ctx);
    const int n_threads = default_threads(c.n_threads);
    p.target_weights = weight_bytes(target);
    p.target_kv = kv_bytes(target, n_ctx, n_threads, c.type_k, c.type_v);
    if (draft) {
        const int n_ctx_draft = resolve_ctx(draft->hparams(), c.n_ctx);
        p.draft_weights = weight_bytes(*draft);
        p.draft_kv = kv_bytes(*draft, n_ctx_draft, n_threads, c.type_k, c.type_v);
    }
    p.available = available;
    add_device_share(p, target, n_ctx, c.n_seqs, false);
    if (draft) add_device_share(p, *draft, resolve_ctx(draft->hparams(), c.n_ctx), c.n_seqs, true);
    return p;
}

std::string describe(const MemoryPlan& p) {
    std::ostringstream s;
    // One cache per sequence: "KV 4 x 1.00 MiB".
    const std::string times = p.n_seqs > 1 ? std::to_string(p.n_seqs) + " x " : "";
    s << "memory: weights " << fmt(p.target_weights) << " + KV " << times << fmt(p.target_kv);
    if (p.draft_weights > 0)
        s << " + draft weights " << fmt(p.draft_weights) << " + draft KV " << times
          << fmt(p.draft_kv);
    if (p.prompt_cache > 0) s << " + prompt cache " << fmt(p.prompt_cache);
    s << " = " << fmt(p.total());
    if (p.available > 0)
        s << " of " << fmt(p.available) << " available";
    else
        s << " (available memory unknown)";
    for (const DeviceShare& d : p.devices) s << "; " << describe(d);
    return s.str();
}

void check_memory(const MemoryPlan& p) {
    for (const DeviceShare& d : p.devices) {
        if (d.have <= 0 || d.total() <= d.have) continue;
        const char* lower = d.target_weights + d.target_kv >= d.draft_weights + d.draft_kv
                                ? "-ngl (target layers on the GPU)"
                                : "-ngld (draft layers on the GPU)";
        fail("the offloaded layers do not fit on the GPU (", describe(d), "); lower ", lower,
             " or -c, or pick another --device (`specula info --devices`)");
    }
    if (p.available <= 0 || p.total() <= p.available) return;
    fail("not enough memory for this run (", describe(p).substr(8), ")",
         "; use a smaller -c, -ctk q8_0 -ctv q8_0, ",
         p.n_seqs > 1 ? "fewer --parallel slots, " : "",
         p.prompt_cache > 0 ? "a smaller --cache-ram, " : "", "or a smaller model");
}

}  // namespace specula
