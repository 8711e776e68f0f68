// measure_read_bandwidth / read_sum: see membw.h. The read loop uses 256-bit loads into four
// independent sums where the CPU has AVX2 (as wide as the kernels' own loads), else 64-bit words.
#include "bench/membw.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "kernels/cpu.h"

namespace specula {

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint8_t* p, size_t n) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        s0 = _mm256_add_epi64(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
        s1 = _mm256_add_epi64(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
        s2 = _mm256_add_epi64(s2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
        s3 = _mm256_add_epi64(s3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
    }
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                       _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    uint64_t r = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; ++i) r += p[i];
    return r;
}
#endif

uint64_t sum_plain(const uint8_t* p, size_t n) {
    uint64_t r = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        std::memcpy(&v, p + i, 8);
        r += v;
    }
    for (; i < n; ++i) r += p[i];
    return r;
}

}  // namespace

uint64_t read_sum(const uint8_t* p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (cpu_features().avx2) return sum_avx2(p, n);
#endif
    return sum_plain(p, n);
}

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
    bytes = std::max<size_t>(bytes, size_t{1} << 20) / 128 * 128;
    std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes]);
    pool.parallel_for(static_cast<int64_t>(bytes), [&](int64_t b, int64_t e) {
        std::memset(buf.get() + b, 1, static_cast<size_t>(e - b));
    });
    std::vector<double> gbs;
    std::vector<uint64_t> sink(static_cast<size_t>(pool.size()));
    for (int r = 0; r < std::max(reps, 1); ++r) {
        const auto t0 = clock_type::now();
        pool.run([&](int ith, int nth) {
            const size_t per = bytes / static_cast<size_t>(nth) / 128 * 128;
            const size_t b = per * static_cast<size_t>(ith);
            const size_t e = ith == nth - 1 ? bytes : b + per;
            sink[static_cast<size_t>(ith)] += read_sum(buf.get() + b, e - b);
        });
        const double s = ms_since(t0) / 1000.0;
        gbs.push_back(s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0);
    }
    volatile uint64_t keep = 0;
    for (uint64_t v : sink) keep = keep + v;
    (void)keep;
    std::sort(gbs.begin(), gbs.end());
    return gbs[gbs.size() / 2];
}

}  // namespace specula
