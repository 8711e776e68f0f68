// A shared prefix (model/state/kv_cache.h share_prefix): attention over a cache whose positions
// [0, P) are read from a base cache gives exactly the bits of attention over one cache holding
// every row, for F32, F16 and Q8_0 caches, head sizes that take the blocked kernels and one that
// does not, P inside a key block and on its edge, and passes that cross P. ctest also runs it with
// SPECULA_SIMD=avx2 and =scalar. The cache's other readers (read_k / read_v, the row runs, save)
// see the base's rows too, a base's valid rows are never written again, and a rollback below P
// shrinks the shared part.
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

constexpr int kRows = 90;

struct Rows {
    std::vector<float> k, v;  // kRows rows of n values, per layer
};

Rows random_rows(int n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    Rows r;
    for (int i = 0; i < 2 * kRows * n; ++i) {
        r.k.push_back(2.f * nd(rng));
        r.v.push_back(nd(rng));
    }
    return r;
}

// Writes rows [p0, p1) of both layers and makes them valid.
void fill(KVCache& kv, const Rows& r, int n, int p0, int p1) {
    for (int layer = 0; layer < 2; ++layer)
        for (int p = p0; p < p1; ++p) {
            const size_t at = (size_t(layer) * kRows + size_t(p)) * size_t(n);
            kv.write(layer, p, r.k.data() + at, r.v.data() + at);
        }
    kv.append(std::vector<token_id>(size_t(p1 - p0), 7));
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

struct Case {
    int n_head, n_head_kv, hd;
    KVType type;
};

}  // namespace

TEST(SharedPrefix, AttentionGivesTheBitsOfOneWholeCache) {
    ThreadPool pool(2);
    for (const Case c :
         {Case{4, 2, 32, KVType::F32}, Case{4, 2, 32, KVType::F16}, Case{4, 2, 32, KVType::Q8_0},
          Case{2, 1, 64, KVType::Q8_0}, Case{4, 2, 16, KVType::F16}, Case{2, 1, 12, KVType::F32}}) {
        const int n = c.n_head_kv * c.hd;
        const Rows r = random_rows(n, unsigned(c.hd * 10 + int(c.type)));
        std::vector<float> q(size_t(kRows) * c.n_head * c.hd);
        std::mt19937 rng(5);
        std::normal_distribution<float> nd(0.f, 1.f);
        for (float& x : q) x = nd(rng);
        const AttentionShape s{c.n_head, c.n_head_kv, c.hd, 1.0f / std::sqrt(float(c.hd))};
        KVCache whole(2, kRows + 3, n, c.type, c.type, {}, 0, c.hd);
        fill(whole, r, n, 0, kRows);
        for (int P : {1, 16, 37, 64}) {
            auto base = std::make_shared<KVCache>(2, kRows + 3, n, c.type, c.type,
                                                  std::span<const int>{}, 0, c.hd, true);
            fill(*base, r, n, 0, P + 5);  // the base may hold more than is shared
            KVCache own(2, kRows + 3, n, c.type, c.type, {}, 0, c.hd);
            own.share_prefix(base, P);
            ASSERT_EQ(own.n_past(), P);
            fill(own, r, n, P, kRows);
            for (int pass : {1, 9, 64}) {
                const std::vector<float> want = attend_all(whole, s, q, pass, pool);
                const std::vector<float> got = attend_all(own, s, q, pass, pool);
                for (size_t i = 0; i < want.size(); ++i)
                    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                        << "head " << c.hd << " " << kv_type_name(c.type) << " P " << P << " pass "
                        << pass << " value " << i;
            }
            // The other readers: rows as floats, row runs, and a snapshot.
            std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
            for (int p = 0; p < kRows; ++p) {
                whole.read_v(1, p, 0, n, a.data());
                own.read_v(1, p, 0, n, b.data());
                ASSERT_EQ(a, b) << "V row " << p;
                whole.read_k(0, p, 0, n, a.data());
                own.read_k(0, p, 0, n, b.data());
                ASSERT_EQ(a, b) << "K row " << p;
            }
            std::vector<float> ra(size_t(kRows) * n), rb(size_t(kRows) * n);
            whole.read_v_rows(1, 0, kRows, 0, c.hd, ra.data());
            own.read_v_rows(1, 0, kRows, 0, c.hd, rb.data());
            EXPECT_EQ(ra, rb);
            EXPECT_EQ(own.run(1, 0, kRows), P);
            const KVSnapshot sa = whole.save(kRows), sb = own.save(kRows);
            EXPECT_EQ(sa.k, sb.k);
            EXPECT_EQ(sa.v, sb.v);
        }
    }
}

TEST(SharedPrefix, ABaseIsBuiltByOneCacheAndNeverRewritten) {
    const int n = 64, hd = 32;
    const Rows r = random_rows(n, 3);
    auto base = std::make_shared<KVCache>(2, kRows, n, KVType::F16, KVType::F16,
                                          std::span<const int>{}, 0, hd, true);
    KVCache builder(2, kRows, n, KVType::F16, KVType::F16, {}, 0, hd);
    builder.share_prefix(base, 40);  // builds [0, 40) into the base
    EXPECT_EQ(builder.n_past(), 0);
    builder.truncate(0);  // a rollback to where it is (a generation's start) keeps it building
    EXPECT_EQ(builder.shared(), 40);
    fill(builder, r, n, 0, 30);
    EXPECT_EQ(base->n_past(), 30);
    fill(builder, r, n, 30, 50);  // crosses the limit: 10 more into the base, 10 of its own
    EXPECT_EQ(base->n_past(), 40);
    EXPECT_EQ(builder.own_touched(), 10);
    // A reader shares what the base holds; its own rows start past it.
    KVCache reader(2, kRows, n, KVType::F16, KVType::F16, {}, 0, hd);
    reader.share_prefix(base, 40);
    EXPECT_EQ(reader.n_past(), 40);
    EXPECT_EQ(reader.own_touched(), 0);
    // The base's valid rows are immutable: a second writer below them is refused.
    KVCache other(2, kRows, n, KVType::F16, KVType::F16, {}, 0, hd);
    other.share_prefix(base, 40);
    other.truncate(0);
    EXPECT_EQ(other.shared(), 0);
    other.share_prefix(base, 40);
    EXPECT_THROW(other.write(0, 10, r.k.data(), r.v.data()), Error);
    // A rollback below the limit shrinks the shared part: the rows after are the reader's own.
    reader.truncate(20);
    EXPECT_EQ(reader.shared(), 20);
    fill(reader, r, n, 20, 25);
    EXPECT_EQ(base->n_past(), 40);
    // Another shape, or a cache that holds positions, is refused.
    KVCache wrong(2, kRows, n, KVType::F32, KVType::F32, {}, 0, hd);
    EXPECT_THROW(wrong.share_prefix(base, 10), Error);
    EXPECT_THROW(reader.share_prefix(base, 10), Error);
}
