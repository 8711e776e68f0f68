// How fast this machine streams memory: the ceiling a memory-bound decode step can reach.
// measure_read_bandwidth() reads a buffer far larger than the caches with every thread of the pool
// (each its own contiguous slice, AVX2 loads where the CPU has them) and reports bytes per second.
// `specula bench` and the kernel benchmarks quote achieved weight bandwidth as a fraction of it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/threadpool.h"

namespace specula {

// Sum of n bytes read with the widest loads this CPU has (the read loop of the bandwidth test).
uint64_t read_sum(const uint8_t* p, size_t n);

// Median over `reps` full passes of a `bytes`-sized buffer (allocated and touched once here),
// in GB/s (1e9 bytes per second).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t{512} << 20, int reps = 5);

}  // namespace specula
