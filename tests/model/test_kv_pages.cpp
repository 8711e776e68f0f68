// The memory a KV cache commits follows the positions written (model/state/kv_cache.h): a cache
// reserved for a long context costs little until it is filled, with the kernel policy's huge pages
// on (the first 2 MiB of each head's rows on small pages) as with small pages. Where transparent
// huge pages are on, a huge page at the start of every head's rows committed 2 MiB per head, layer
// and side for one written position. Rows written past the first 2 MiB read back as written.
#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "model/state/kv_cache.h"

using namespace specula;

namespace {

size_t resident_bytes() {
    size_t size = 0, pages = 0;
    std::ifstream("/proc/self/statm") >> size >> pages;
    return pages * 4096;
}

constexpr int kLayers = 4, kCtx = 32768, kHeads = 8, kHeadDim = 128, kWidth = kHeads * kHeadDim;

TEST(KVPages, OnePositionCommitsLittleOfALongContext) {
    for (const bool small : {false, true}) {
        const size_t before = resident_bytes();
        KVCache kv(kLayers, kCtx, kWidth, KVType::F16, KVType::F16, {}, 0, kHeadDim, small);
        std::vector<float> k(kWidth, 0.5f), v(kWidth, -0.25f);
        for (int il = 0; il < kLayers; ++il) kv.write(il, 0, k.data(), v.data());
        const std::vector<token_id> t = {1};
        kv.append(t);
        // 64 head runs of 8 MiB: one 4 KiB page each is 256 KiB; 2 MiB each would be 128 MiB.
        EXPECT_LT(resident_bytes() - before, size_t{16} << 20)
            << (small ? "small pages" : "policy");
        float out[4];
        kv.read_v(kLayers - 1, 0, kWidth - 4, 4, out);
        EXPECT_EQ(out[3], -0.25f);
    }
}

TEST(KVPages, RowsPastTheSmallPagesReadBack) {
    const int n = 9000;  // past 8,192 positions: a 128-value F16 head's first 2 MiB
    KVCache kv(1, kCtx, kWidth, KVType::F16, KVType::F32, {}, 0, kHeadDim, false);
    std::vector<float> k(kWidth), v(kWidth);
    std::vector<token_id> t;
    for (int p = 0; p < n; ++p) {
        for (int i = 0; i < kWidth; ++i) {
            k[size_t(i)] = float((p + i) % 1024);  // exact in F16
            v[size_t(i)] = float(p) + 0.5f * float(i % 7);
        }
        kv.write(0, p, k.data(), v.data());
        t.push_back(p % 500);
    }
    kv.append(t);
    for (const int p : {0, 8191, 8192, 8193, n - 1}) {
        for (const int h : {0, kHeads - 1}) {
            float kr[kHeadDim], vr[kHeadDim];
            kv.read_k(0, p, h * kHeadDim, kHeadDim, kr);
            kv.read_v(0, p, h * kHeadDim, kHeadDim, vr);
            for (int d = 0; d < kHeadDim; ++d) {
                const int i = h * kHeadDim + d;
                ASSERT_EQ(kr[d], float((p + i) % 1024)) << "position " << p << " value " << i;
                ASSERT_EQ(vr[d], float(p) + 0.5f * float(i % 7)) << "position " << p;
            }
        }
    }
}

}  // namespace
