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

void add_device_share(MemoryPlan& p, const Model& m, int n_ctx, bool draft) {
    OffloadParams op = m.placement();
    op.n_ctx = n_ctx;
    const OffloadPlan o = plan_offload(m, op);
    if (o.n_layers == 0) return;
    DeviceShare& d = share_of(p, o);
    (draft ? d.draft_weights : d.target_weights) += o.weight_bytes;
    (draft ? d.draft_kv : d.target_kv) += o.kv_bytes;
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
    add_device_share(p, target, n_ctx, false);
    if (draft) add_device_share(p, *draft, n_ctx, true);
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
         "; use a smaller -c, -ctk q8_0 -ctv q8_0, or a smaller model");
}

}  // namespace specula::cli
