// The memory plan `run`, `chat`, `serve` and `bench` print after loading (mapping) the models and
// before allocating any cache: the weights of the target and of the draft model, the KV caches
// (one per sequence: `serve` has one per --parallel slot; each counts its context, layers, row
// width and types), their total, and the memory available (MemAvailable in /proc/meminfo, read
// before the models were loaded). A total over the available memory is refused with an Error
// naming each part and what to change; every command words it the same.
// With -ngl / -ngld, the plan also counts each Vulkan device's share (the offloaded weights and
// the device KV caches, model/load/offload.h's plan_offload) against that device's memory, and
// refuses a device that cannot hold its share, naming the device, the sizes and the flag to lower.
// A drafter that is not a draft model (an EAGLE-3 head and its cache, Medusa heads, the suffix
// trees) is counted as the parts the runtime names (DrafterPart, from the speculative setup:
// speculative/drafter_memory.h).
#pragma once

#include <string>
#include <vector>

#include "model/load/model.h"
#include "model/session.h"
#include "model/state/kv_cache.h"

namespace specula {

struct DeviceShare {
    int device = -1;
    std::string name;
    double have = 0;  // the device's memory; 0: unknown, never refused
    double target_weights = 0, target_kv = 0, draft_weights = 0, draft_kv = 0;
    double total() const { return target_weights + target_kv + draft_weights + draft_kv; }
};

// One part of a drafter's memory besides a draft model: held once (a head's weights, the suffix
// cache's bound) or by every sequence (a head's KV cache, a sequence's own suffix tree).
struct DrafterPart {
    std::string label;  // how the plan line names it, e.g. "EAGLE-3 head"
    double bytes = 0;
    bool per_seq = false;
};

struct MemoryPlan {
    // What the process holds besides the weights when the plan is made (its code, the parsed
    // metadata and tokenizers: VmRSS less the weights' resident pages; 0 where /proc is absent).
    double runtime = 0;
    double target_weights = 0, draft_weights = 0;
    // One sequence's KV cache of each model over the whole context (with a hybrid model's
    // recurrent state and an MTP head's cache).
    double target_kv = 0, draft_kv = 0;
    // Each model's pass buffers: a pass of n_ubatch rows and the attention scratch over the
    // context (model/forward_pass.h); the sessions of one model share them when they share a
    // thread pool (serve's slots: SessionParams::shared_pass), so they count once.
    double target_pass = 0, draft_pass = 0;
    double logits = 0;        // the logits rows one sequence keeps, target and draft
    int n_seqs = 1;           // sequences (serve: its slots)
    double kv_seqs = 1;       // sequences' worth of KV: n_seqs, or serve's pool / the context
    int64_t kv_pool = 0;      // serve's KV pool in positions (0: each sequence its whole cache)
    double available = 0;     // 0: unknown (no /proc/meminfo), never refused
    double prompt_cache = 0;  // serve --cache-ram: the host-RAM prompt cache's bound
    std::vector<DrafterPart> drafter;  // CachePlan::drafter
    double drafter_bytes() const {
        double b = 0;
        for (const DrafterPart& d : drafter) b += d.per_seq ? n_seqs * d.bytes : d.bytes;
        return b;
    }
    double total() const {
        return runtime + target_weights + draft_weights + kv_seqs * (target_kv + draft_kv) +
               target_pass + draft_pass + n_seqs * logits + prompt_cache + drafter_bytes();
    }
    std::vector<DeviceShare> devices;  // one per Vulkan device in use
};

// MemAvailable from /proc/meminfo, in bytes; 0 when it cannot be read.
double mem_available_bytes();

// What the caches will be: n_seqs sequences, each with an n_ctx cache of the given types for the
// target and one for the draft model (when there is one).
struct CachePlan {
    int n_ctx = 0;      // 0: the session default (SessionParams, resolved per model)
    int n_threads = 0;  // 0: default_threads (common/threadpool.h)
    KVType type_k = KVType::F16, type_v = KVType::F16;
    int n_seqs = 1;
    int n_ubatch = SessionParams::kDefaultUbatch;  // the most tokens of one pass (-ub)
    // The logits rows a session keeps at most: 1 for plain decoding, 1 + the longest draft for
    // a verify pass (a prompt keeps only its last row, whatever its length).
    int logit_rows = 1;
    // serve's KV pool: the positions of every slot's caches together (server/serving/kv_pool.h); 0:
    // each sequence its whole context.
    int64_t kv_pool = 0;
    // A drafter's memory besides a draft model (speculative/drafter_memory.h); empty: none.
    std::vector<DrafterPart> drafter;
};

// The plan for a target and an optional draft model; each "KV" counts, for a hybrid model, its
// recurrent state (RecurrentState::bytes) too; each "pass" the buffers of a pass of n_ubatch rows
// with the attention scratch (n_threads x 16 score rows of n_ctx floats).
MemoryPlan plan_memory(const Model& target, const Model* draft, const CachePlan& caches,
                       double available);

// "memory: runtime 9 MiB + weights 1.2 MiB + KV 5.0 MiB + ... = 18.1 MiB of 20.3 GiB
// available"; with several sequences "KV 4 x 5.0 MiB", with a pool "KV pool 2048 positions
// 5.0 MiB"; a drafter's parts by their labels ("+ EAGLE-3 head 1.1 MiB + EAGLE-3 head KV 4 x
// 512 KiB").
std::string describe(const MemoryPlan& p);

// Error when the plan exceeds the available memory or a device's share exceeds the device.
void check_memory(const MemoryPlan& p);

}  // namespace specula
