// The memory plan `run` / `chat` print before allocating anything: the weights of the target and
// of the draft model, each KV cache (its context, layers, row width and types), their total, and
// the memory available (MemAvailable in /proc/meminfo, read before the models were loaded). A
// total over the available memory is refused with an Error naming each part and what to change.
// With -ngl / -ngld, the plan also counts each Vulkan device's share (the offloaded weights and
// the device KV caches, model/offload.h's plan_offload) against that device's memory, and
// refuses a device that cannot hold its share, naming the device, the sizes and the flag to lower.
#pragma once

#include <string>
#include <vector>

#include "model/kv_cache.h"
#include "model/model.h"

namespace specula::cli {

struct DeviceShare {
    int device = -1;
    std::string name;
    double have = 0;  // the device's memory; 0: unknown, never refused
    double target_weights = 0, target_kv = 0, draft_weights = 0, draft_kv = 0;
    double total() const { return target_weights + target_kv + draft_weights + draft_kv; }
};

struct MemoryPlan {
    double target_weights = 0, target_kv = 0, draft_weights = 0, draft_kv = 0;
    double available = 0;  // 0: unknown (no /proc/meminfo), never refused
    double total() const { return target_weights + target_kv + draft_weights + draft_kv; }
    std::vector<DeviceShare> devices;  // one per Vulkan device in use
};

// MemAvailable from /proc/meminfo, in bytes; 0 when it cannot be read.
double mem_available_bytes();

// The plan for a target with an n_ctx cache of the given types and an optional draft model
// whose cache has the same context and types; each "KV" counts its session's attention scratch
// (n_threads x 16 score rows of n_ctx floats) too.
MemoryPlan plan_memory(const Model& target, const Model* draft, int n_ctx, int n_threads,
                       KVType type_k, KVType type_v, double available);

// "memory: weights 1.2 MiB + KV 5.0 MiB (target) + ... = 8.1 MiB of 20.3 GiB available".
std::string describe(const MemoryPlan& p);

// Error when the plan exceeds the available memory or a device's share exceeds the device.
void check_memory(const MemoryPlan& p);

}  // namespace specula::cli
