// A layer whose V rows are its K rows (KVLayerShape::v_is_k, deepseek2's MLA cache): the cache
// keeps K only (half the bytes of keeping both), and every V reader sees K's rows. Attention over
// such a cache gives the bits of attention over a cache that stores the same rows as K and as V,
// for F32, F16 and Q8_0, head sizes that take the blocked kernels and one that does not, one and
// two KV heads; read_v / read_v_rows, a snapshot and its restore, and a shared prefix agree too.
// ctest runs it under ASan with the other model tests.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/threadpool.h"
#include "model/blocks/attention.h"
#include "model/state/kv_cache.h"

using namespace specula;

namespace {

constexpr int kRows = 40;

struct Case {
    int n_head, n_head_kv, hd;
    KVType type;
};

std::vector<float> random_floats(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

std::vector<KVLayerShape> shapes(int n, int hd, bool v_is_k) {
    return std::vector<KVLayerShape>(2, KVLayerShape{n, hd, v_is_k});
}

// Rows [p0, p1) of both layers, V = K; `v` (garbage) is what a v_is_k cache must never store.
void fill(KVCache& kv, const std::vector<float>& k, const std::vector<float>& v, int n, int p0,
          int p1) {
    for (int layer = 0; layer < 2; ++layer)
        for (int p = p0; p < p1; ++p) {
            const size_t at = (size_t(layer) * kRows + size_t(p)) * size_t(n);
            kv.write(layer, p, k.data() + at, (kv.v_is_k(layer) ? v : k).data() + at);
        }
    kv.append(std::vector<token_id>(size_t(p1 - p0), 3));
}

std::vector<float> attend_all(const KVCache& kv, const AttentionShape& s,
                              const std::vector<float>& q, int pass, ThreadPool& pool) {
    const int64_t ldq = int64_t(s.n_head) * s.head_dim;
    std::vector<float> out(q.size(), NAN);
    std::vector<float> scores(attention_scratch_floats(s, kv.n_ctx(), pool.size()));
    for (int p0 = 0; p0 < kRows; p0 += pass) {
        const int n = std::min(pass, kRows - p0);
        attention(kv, 1, p0, n, q.data() + p0 * ldq, out.data() + p0 * ldq, s, pool, scores.data());
    }
    return out;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << what << ", value " << i;
}

}  // namespace

TEST(KVVIsK, AttentionGivesTheBitsOfSeparateVRows) {
    ThreadPool pool(2);
    // 96: deepseek2's test file (blocked kernels); 288: past the blocked kernels' 256.
    for (const Case c :
         {Case{4, 1, 96, KVType::F32}, Case{4, 1, 96, KVType::F16}, Case{4, 1, 96, KVType::Q8_0},
          Case{2, 1, 288, KVType::F32}, Case{2, 1, 288, KVType::F16}, Case{2, 1, 288, KVType::Q8_0},
          Case{4, 2, 32, KVType::F16}}) {
        const int n = c.n_head_kv * c.hd;
        const std::string what = std::to_string(c.hd) + " " + kv_type_name(c.type);
        const std::vector<float> k = random_floats(size_t(2) * kRows * n, unsigned(c.hd));
        const std::vector<float> junk = random_floats(k.size(), 99);
        const std::vector<float> q = random_floats(size_t(kRows) * c.n_head * c.hd, 5);
        const AttentionShape s{c.n_head, c.n_head_kv, c.hd, 1.0f / std::sqrt(float(c.hd))};
        KVCache both(shapes(n, c.hd, false), kRows, c.type, c.type, {}, 0);
        KVCache once(shapes(n, c.hd, true), kRows, c.type, c.type, {}, 0);
        fill(both, k, k, n, 0, kRows);
        fill(once, k, junk, n, 0, kRows);
        EXPECT_EQ(KVCache::bytes(shapes(n, c.hd, true), kRows, c.type, c.type, {}, 0) * 2,
                  KVCache::bytes(shapes(n, c.hd, false), kRows, c.type, c.type, {}, 0));
        for (int pass : {1, 9, kRows}) {
            const auto want = attend_all(both, s, q, pass, pool);
            expect_same_bits(attend_all(once, s, q, pass, pool), want,
                             what + " pass " + std::to_string(pass));
        }
        // The V readers see K's rows.
        std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        for (int p = 0; p < kRows; ++p) {
            both.read_v(1, p, 0, n, a.data());
            once.read_v(1, p, 0, n, b.data());
            ASSERT_EQ(a, b) << what << " V row " << p;
        }
        std::vector<float> ra(size_t(kRows) * c.hd), rb(ra.size());
        both.read_v_rows(1, 0, kRows, 0, c.hd, ra.data());
        once.read_v_rows(1, 0, kRows, 0, c.hd, rb.data());
        EXPECT_EQ(ra, rb) << what;
        EXPECT_EQ(once.type_v(1), c.type);
        // A snapshot holds K only, and restores the same attention.
        const KVSnapshot sa = both.save(kRows), sb = once.save(kRows);
        EXPECT_EQ(sb.k, sa.k) << what;
        EXPECT_TRUE(sb.v.empty()) << what;
        KVCache restored(shapes(n, c.hd, true), kRows, c.type, c.type, {}, 0);
        restored.restore(sb);
        expect_same_bits(attend_all(restored, s, q, 9, pool), attend_all(both, s, q, 9, pool),
                         what + " restored");
        EXPECT_THROW(restored.restore(sa), Error) << "a snapshot with V rows is another shape";
        // A shared prefix of a v_is_k base.
        auto base = std::make_shared<KVCache>(shapes(n, c.hd, true), kRows, c.type, c.type,
                                              std::span<const int>{}, 0, true);
        fill(*base, k, junk, n, 0, 17);
        KVCache own(shapes(n, c.hd, true), kRows, c.type, c.type, {}, 0);
        own.share_prefix(base, 17);
        fill(own, k, junk, n, 17, kRows);
        expect_same_bits(attend_all(own, s, q, 9, pool), attend_all(both, s, q, 9, pool),
                         what + " shared prefix");
        KVCache other(shapes(n, c.hd, false), kRows, c.type, c.type, {}, 0);
        EXPECT_THROW(other.share_prefix(base, 17), Error) << "a base of another layout";
    }
}

// A v_is_k layer's V takes K's type whatever the cache's V type: the same bits as a cache of K's
// type on both sides, and no V memory.
TEST(KVVIsK, VTakesKsType) {
    ThreadPool pool(1);
    const int hd = 64;
    const std::vector<float> k = random_floats(size_t(2) * kRows * hd, 7);
    const std::vector<float> q = random_floats(size_t(kRows) * 2 * hd, 8);
    const AttentionShape s{2, 1, hd, 0.125f};
    KVCache same(shapes(hd, hd, true), kRows, KVType::F16, KVType::F16, {}, 0);
    KVCache mixed(shapes(hd, hd, true), kRows, KVType::F16, KVType::Q8_0, {}, 0);
    fill(same, k, k, hd, 0, kRows);
    fill(mixed, k, k, hd, 0, kRows);
    EXPECT_EQ(mixed.type_v(0), KVType::F16);
    EXPECT_EQ(mixed.type_v(), KVType::Q8_0);  // the cache's, for layers with V rows of their own
    EXPECT_EQ(KVCache::bytes(shapes(hd, hd, true), kRows, KVType::F16, KVType::Q8_0, {}, 0),
              KVCache::bytes(shapes(hd, hd, true), kRows, KVType::F16, KVType::F32, {}, 0));
    expect_same_bits(attend_all(mixed, s, q, 5, pool), attend_all(same, s, q, 5, pool), "mixed");
    // A width a q8_0 V side could not take is fine when V is K of another type.
    EXPECT_NO_THROW(KVCache(shapes(40, 40, true), kRows, KVType::F16, KVType::Q8_0, {}, 0));
    EXPECT_THROW(KVCache(shapes(40, 40, false), kRows, KVType::F16, KVType::Q8_0, {}, 0), Error);
}
