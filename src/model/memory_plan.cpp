// mem_available_bytes / plan_memory / describe / check_memory: see memory_plan.h.
#include "model/memory_plan.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/format.h"
#include "common/threadpool.h"
#include "model/blocks/attention.h"
#include "model/forward_pass.h"
#include "model/session.h"
#include "model/state/recurrent_state.h"
#include "model/state/sequence_state.h"

namespace specula {

namespace {

// The files' tensors, and the repacked copies whose originals stay in use: a matrix packed from
// the token embedding (a tied output matrix) keeps the embedding's rows mapped for get_rows
// (model/load/pack.cpp releases every other original).
double weight_bytes(const Model& m) {
    double b = 0;
    for (const GGUFTensor& t : m.file().tensors()) b += double(t.nbytes);
    if (m.mtp_file())
        for (const GGUFTensor& t : m.mtp_file()->tensors()) b += double(t.nbytes);
    if (m.output.packed && m.output.data == m.tok_embd.data) b += double(packed_size(m.output));
    return b;
}

// The cache, a hybrid model's recurrent state (model/state/recurrent_state.h: two copies and the
// inputs an exact rollback replays), and the one-layer cache of an MTP head (a Session of a model
// with the head always has it).
double kv_bytes(const Model& m, int n_ctx, KVType k, KVType v) {
    const HParams& hp = m.hparams();
    return KVCache::bytes(kv_shapes(hp), n_ctx, k, v, kv_windows(hp),
                          SessionParams::kDefaultSwaMaxPass) +
           RecurrentState::bytes(hp) +
           (m.has_mtp()
                ? KVCache::bytes(std::vector<KVLayerShape>{mtp_kv_shape(hp)}, n_ctx, k, v, {}, 0)
                : 0.0);
}

// A model's pass buffers: a pass of at most n_ubatch rows (never more than the context), with
// several sequences the output rows of them all copied through the pass, and the attention
// scores scratch that grows with the context.
double pass_bytes(const Model& m, int n_ctx, int n_threads, int logit_rows, const CachePlan& c) {
    const HParams& hp = m.hparams();
    const int rows = std::max(1, std::min(c.n_ubatch, n_ctx));
    ForwardPass pass(m);
    const int copied = c.n_seqs > 1 ? std::min(rows, c.n_seqs * logit_rows) : 0;
    const AttentionShape s{hp.n_head, hp.n_head_kv, hp.max_head_dim(), 1.f};
    return pass.buffer_bytes(rows, copied) +
           sizeof(float) * double(attention_scratch_floats(s, n_ctx, n_threads));
}

// The logits rows a session keeps (with an MTP head, the hidden row of each too).
double logits_bytes(const Model& m, int rows) {
    const HParams& hp = m.hparams();
    const double per_row = double(hp.n_vocab) + (m.has_mtp() ? 2.0 * hp.n_embd : 0.0);
    return sizeof(float) * per_row * rows;
}

// Resident bytes of the pages over [p, p + n) (mincore); 0 when it cannot be asked.
double resident_bytes(const void* p, size_t n) {
    if (!p || n == 0) return 0;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p) / page * page;
    const uintptr_t hi = reinterpret_cast<uintptr_t>(p) + n;
    std::vector<unsigned char> in((hi - lo + page - 1) / page);
    if (mincore(reinterpret_cast<void*>(lo), hi - lo, in.data()) != 0) return 0;
    double r = 0;
    for (unsigned char c : in) r += (c & 1) ? double(page) : 0.0;
    return r;
}

// The bytes of this process's resident set in mappings overlapping [lo, hi) (/proc/self/smaps:
// a file mapping's pages in the page cache are not all in the process's resident set, which is
// what mincore would report; repacked weights' originals are released from the set).
double mapped_rss(const uint8_t* lo, const uint8_t* hi) {
    std::ifstream f("/proc/self/smaps");
    std::string line;
    bool in = false;
    double r = 0;
    const auto a = reinterpret_cast<uintptr_t>(lo), b = reinterpret_cast<uintptr_t>(hi);
    while (std::getline(f, line)) {
        unsigned long start = 0, end = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2 &&
            line.find('-') < line.find(' ')) {
            in = start < b && end > a;
        } else if (in && line.rfind("Rss:", 0) == 0) {
            r += std::atof(line.c_str() + 4) * 1024;
        }
    }
    return r;
}

// The resident pages of a model's weights: its files' tensor data and its repacked copies.
double weights_resident(const Model& m) {
    double r = 0;
    for (const GGUFFile* f : {&m.file(), m.mtp_file()}) {
        if (!f || f->tensors().empty()) continue;
        const uint8_t *lo = nullptr, *hi = nullptr;
        for (const GGUFTensor& t : f->tensors()) {
            if (!lo || t.data < lo) lo = t.data;
            if (!hi || t.data + t.nbytes > hi) hi = t.data + t.nbytes;
        }
        r += mapped_rss(lo, hi);
    }
    for (const PackedBuffer& b : m.packed) r += resident_bytes(b.data(), b.size());
    if (m.packed_file) r += resident_bytes(m.packed_file->data(), m.packed_file->size());
    return r;
}

// VmRSS from /proc/self/status, in bytes; 0 when it cannot be read.
double resident_set_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) * 1024;
    return 0;
}

std::string fmt(double bytes) {
    return format_bytes(static_cast<uint64_t>(bytes));
}

std::string times_n(int n) {
    return std::to_string(n) + " x ";
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
    const int rows = std::max(c.logit_rows, 1);
    p.target_kv = kv_bytes(target, n_ctx, c.type_k, c.type_v);
    p.target_pass = pass_bytes(target, n_ctx, n_threads, rows, c);
    p.logits = logits_bytes(target, rows);
    if (draft) {
        const int n_ctx_draft = resolve_ctx(draft->hparams(), c.n_ctx);
        p.draft_weights = weight_bytes(*draft);
        p.draft_kv = kv_bytes(*draft, n_ctx_draft, c.type_k, c.type_v);
        // A draft session keeps one logits row (it proposes from the last one).
        p.draft_pass = pass_bytes(*draft, n_ctx_draft, n_threads, 1, c);
        p.logits += logits_bytes(*draft, 1);
    }
    if (c.kv_pool < 0) fail("plan_memory: kv_pool must be >= 0, got ", c.kv_pool);
    p.kv_pool = c.kv_pool;
    p.kv_seqs = c.kv_pool > 0 ? double(c.kv_pool) / n_ctx : double(c.n_seqs);
    p.available = available;
    p.drafter = c.drafter;
    const double rss = resident_set_bytes();
    const double held = weights_resident(target) + (draft ? weights_resident(*draft) : 0.0);
    p.runtime = std::max(0.0, rss - held);
    add_device_share(p, target, n_ctx, c.n_seqs, false);
    if (draft) add_device_share(p, *draft, resolve_ctx(draft->hparams(), c.n_ctx), c.n_seqs, true);
    return p;
}

std::string describe(const MemoryPlan& p) {
    std::ostringstream s;
    // One cache per sequence: "KV 4 x 1.00 MiB"; a pool: "KV pool 2048 positions 1.00 MiB".
    const bool pool = p.kv_pool > 0;
    const std::string times = !pool && p.n_seqs > 1 ? times_n(p.n_seqs) : "";
    const double kv_mult = pool ? p.kv_seqs : 1.0;
    s << "memory: ";
    if (p.runtime > 0) s << "runtime " << fmt(p.runtime) << " + ";
    s << "weights " << fmt(p.target_weights) << " + KV ";
    if (pool) s << "pool " << p.kv_pool << " positions ";
    s << times << fmt(kv_mult * p.target_kv);
    if (p.draft_weights > 0)
        s << " + draft weights " << fmt(p.draft_weights) << " + draft KV " << times
          << fmt(kv_mult * p.draft_kv);
    s << " + passes " << fmt(p.target_pass + p.draft_pass);
    s << " + logits " << (p.n_seqs > 1 ? times_n(p.n_seqs) : "") << fmt(p.logits);
    for (const DrafterPart& d : p.drafter)
        s << " + " << d.label << " " << (d.per_seq && p.n_seqs > 1 ? times_n(p.n_seqs) : "")
          << fmt(d.bytes);
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
         p.kv_pool > 0  ? "a smaller --kv-pool, "
         : p.n_seqs > 1 ? "fewer --parallel slots, "
                        : "",
         p.prompt_cache > 0 ? "a smaller --cache-ram, " : "", "or a smaller model");
}

}  // namespace specula
