// measure_read_bandwidth: see membw.h. The summing loop is plain C++ over 64-bit words with four
// independent sums, which the compiler vectorizes (compiled a second time for AVX2, taken when the
// CPU has it, so the loads are as wide as the kernels' own); the read itself is what is measured.
#include "kernels/membw.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace specula {

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
#define SPECULA_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define SPECULA_MULTIVERSION
#endif

SPECULA_MULTIVERSION uint64_t sum_words(const uint64_t* p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < n; ++i) s0 += p[i];
    return s0 + s1 + s2 + s3;
}

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
    const size_t words = std::max<size_t>(bytes / sizeof(uint64_t), 1024);
    std::unique_ptr<uint64_t[]> buf(new uint64_t[words]);
    pool.parallel_for(static_cast<int64_t>(words), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i);
    });
    std::vector<double> gbs;
    std::vector<uint64_t> sink(static_cast<size_t>(pool.size()));
    for (int r = 0; r < std::max(reps, 1); ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        pool.run([&](int ith, int nth) {
            const size_t per = (words + nth - 1) / nth;
            const size_t b = std::min(words, per * ith), e = std::min(words, b + per);
            sink[ith] += sum_words(buf.get() + b, e - b);
        });
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        gbs.push_back(s > 0 ? words * sizeof(uint64_t) / s / 1e9 : 0);
    }
    volatile uint64_t keep = 0;
    for (uint64_t v : sink) keep = keep + v;
    (void)keep;
    std::sort(gbs.begin(), gbs.end());
    return gbs[gbs.size() / 2];
}

}  // namespace specula
