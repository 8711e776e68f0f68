// Attention over the KV cache (see attention.h).
#include "model/attention.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/table.h"
#include "model/ops.h"

namespace specula {

namespace {

constexpr int64_t kMinParallelFlops = 1 << 16;

// Queries per blocked work item: P consecutive positions x H query heads of one KV head.
constexpr int kBlockQueries = 16;
// Rows of an F16 / Q8_0 cache dequantized at a time (per thread, head_dim floats each).
constexpr int kChunkRows = 64;

// The attention kernels of the table (kernels/attention.h), chosen once per process: each member
// from the best ISA that has one, the scalar loops of model/ops.h where none has.
const AttentionEntry& attention_kernels() {
    static const AttentionEntry k = [] {
        AttentionEntry e = best_attention();
        if (!e.dot) e.dot = dot_f32;
        if (!e.axpy) e.axpy = axpy;
        return e;
    }();
    return k;
}

void softmax_row(float* x, int n) {
    softmax(x, n);
}

// Thread ith's row buffer, after every thread's scores.
float* row_buffer(float* scores, int ith, int n_threads, int n_ctx, int head_dim) {
    return scores + static_cast<size_t>(n_threads) * kBlockQueries * n_ctx +
           static_cast<size_t>(ith) * kChunkRows * head_dim;
}

// The first cache row a query at position `pos` sees.
int first_row(const AttentionShape& s, int pos) {
    return s.window > 0 ? std::max(0, pos + 1 - s.window) : 0;
}

// One query head of one token: softmax(q . K^T * scale) . V over positions [j0, n_kv). Rows of a
// typed cache are dequantized into `buf` (head_dim floats) one at a time.
void attend_head(const AttentionEntry& kern, const KVCache& kv, int layer, int j0, int n_kv,
                 int kv_off, const float* q, float* out, const AttentionShape& s, float* scores,
                 float* buf) {
    const int hd = s.head_dim;
    const bool k32 = kv.type_k() == KVType::F32, v32 = kv.type_v() == KVType::F32;
    for (int j = j0; j < n_kv; ++j) {
        const float* kj = buf;
        if (k32)
            kj = kv.k(layer, j) + kv_off;
        else
            kv.read_k(layer, j, kv_off, hd, buf);
        scores[j] = kern.dot(q, kj, hd) * s.scale;
    }
    softmax(scores + j0, n_kv - j0);
    std::memset(out, 0, sizeof(float) * hd);
    for (int j = j0; j < n_kv; ++j) {
        const float* vj = buf;
        if (v32)
            vj = kv.v(layer, j) + kv_off;
        else
            kv.read_v(layer, j, kv_off, hd, buf);
        kern.axpy(scores[j], vj, out, hd);
    }
}

// The blocked kernels over cache rows [j0, j1) of the KV head at value offset `off`: in place
// for F32 and F16 rows (F16 widened as loaded), else dequantized kChunkRows at a time into `buf`
// (the kernels see the chunk as rows [0, n) and the score / probability rows shifted to match).
// Splitting [j0, j1) changes no result (kernels/attention.h), so neither does the cache type's
// chunking.
void qk_rows(const BlockAttentionKernels& bk, const KVCache& kv, int layer, int off, int hd, int j0,
             int j1, const float* const* q, int nq, float scale, float* const* s, float* buf) {
    if (kv.type_k() == KVType::F32) {
        bk.qk(kv.k(layer, 0) + off, size_t(kv.n_embd_kv()), j0, j1, q, nq, scale, s);
        return;
    }
    if (kv.type_k() == KVType::F16) {  // widened as loaded: no row buffer to write and read
        bk.qk_h(kv.k_f16(layer, 0) + off, size_t(kv.n_embd_kv()), j0, j1, q, nq, scale, s);
        return;
    }
    float* shifted[kBlockQueries];
    for (int c0 = j0; c0 < j1; c0 += kChunkRows) {
        const int c1 = std::min(j1, c0 + kChunkRows);
        for (int j = c0; j < c1; ++j) kv.read_k(layer, j, off, hd, buf + size_t(j - c0) * hd);
        for (int i = 0; i < nq; ++i) shifted[i] = s[i] + c0;
        bk.qk(buf, size_t(hd), 0, c1 - c0, q, nq, scale, shifted);
    }
}

void pv_rows(const BlockAttentionKernels& bk, const KVCache& kv, int layer, int off, int hd, int j0,
             int j1, const float* const* p, int nq, float* const* out, float* buf) {
    if (kv.type_v() == KVType::F32) {
        bk.pv(kv.v(layer, 0) + off, size_t(kv.n_embd_kv()), j0, j1, p, nq, out);
        return;
    }
    if (kv.type_v() == KVType::F16) {
        bk.pv_h(kv.v_f16(layer, 0) + off, size_t(kv.n_embd_kv()), j0, j1, p, nq, out);
        return;
    }
    const float* shifted[kBlockQueries];
    for (int c0 = j0; c0 < j1; c0 += kChunkRows) {
        const int c1 = std::min(j1, c0 + kChunkRows);
        for (int j = c0; j < c1; ++j) kv.read_v(layer, j, off, hd, buf + size_t(j - c0) * hd);
        for (int i = 0; i < nq; ++i) shifted[i] = p[i] + c0;
        bk.pv(buf, size_t(hd), 0, c1 - c0, shifted, nq, out);
    }
}

struct BlockShape {
    int heads;      // H: query heads of the group per item
    int positions;  // P
    int head_chunks;
};

BlockShape block_shape(const AttentionShape& s) {
    const int group = s.n_head / s.n_head_kv;
    const int h = std::min(group, kBlockQueries);
    return {h, std::max(1, kBlockQueries / h), (group + h - 1) / h};
}

// Like attention_kernels(), the level is chosen once per process.
bool block_kernels(int head_dim, BlockAttentionKernels* k) {
    const auto blocked = attention_kernels().blocked;
    if (!blocked || !blocked(head_dim, k)) return false;
    if (!k->softmax) k->softmax = softmax_row;  // the ISA has none of its own
    return true;
}

// The blocked path: work items of up to kBlockQueries queries sharing one KV head, handed out
// from a counter (the items with the most positions first). Each query's scores, softmax and
// weighted sum are the same operations whatever its item holds: the block's common positions
// [0, first query's count) go through the kernels for all of its queries at once, each query's
// own tail through the same kernels alone (and, with a window, its own rows before the common
// ones).
void attention_blocked(const BlockAttentionKernels& bk, const KVCache& kv, int layer, int pos0,
                       int ntok, const float* q, float* out, const AttentionShape& s,
                       ThreadPool& pool, float* scores, bool parallel) {
    const BlockShape b = block_shape(s);
    const int group = s.n_head / s.n_head_kv, hd = s.head_dim;
    const int64_t ldq = static_cast<int64_t>(s.n_head) * hd;
    const int n_blocks = (ntok + b.positions - 1) / b.positions;
    const int64_t per_block = static_cast<int64_t>(s.n_head_kv) * b.head_chunks;
    const int64_t n_items = per_block * n_blocks;
    std::atomic<int64_t> next{0};
    auto work = [&](int ith, int) {
        float* sc = scores + static_cast<int64_t>(ith) * kBlockQueries * kv.n_ctx();
        float* buf = row_buffer(scores, ith, pool.size(), kv.n_ctx(), hd);
        const float* qp[kBlockQueries];
        float* op[kBlockQueries];
        float* sp[kBlockQueries];
        int lo[kBlockQueries], nkv[kBlockQueries];
        for (int64_t it; (it = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) {
            const int blk = n_blocks - 1 - static_cast<int>(it / per_block);
            const int g = static_cast<int>(it % per_block) / b.head_chunks;
            const int h0 = g * group + static_cast<int>(it % per_block) % b.head_chunks * b.heads;
            const int h1 = std::min((g + 1) * group, h0 + b.heads);
            const int t0 = blk * b.positions, t1 = std::min(ntok, t0 + b.positions);
            int nq = 0;
            for (int t = t0; t < t1; ++t) {
                for (int h = h0; h < h1; ++h, ++nq) {
                    const int64_t off = t * ldq + static_cast<int64_t>(h) * hd;
                    qp[nq] = q + off;
                    op[nq] = out + off;
                    sp[nq] = sc + static_cast<int64_t>(nq) * kv.n_ctx();
                    lo[nq] = first_row(s, pos0 + t);
                    nkv[nq] = pos0 + t + 1;
                }
            }
            // Rows [c0, c1) are seen by every query of the item (with a window, possibly none);
            // each query adds its own rows before and after, always in ascending row order.
            const int off = g * hd;
            const int c0 = first_row(s, pos0 + t1 - 1), c1 = pos0 + t0 + 1;
            const bool shared = c0 < c1;
            if (shared) qk_rows(bk, kv, layer, off, hd, c0, c1, qp, nq, s.scale, sp, buf);
            for (int i = 0; i < nq; ++i) {
                if (!shared) {
                    qk_rows(bk, kv, layer, off, hd, lo[i], nkv[i], qp + i, 1, s.scale, sp + i, buf);
                } else {
                    if (lo[i] < c0)
                        qk_rows(bk, kv, layer, off, hd, lo[i], c0, qp + i, 1, s.scale, sp + i, buf);
                    if (nkv[i] > c1)
                        qk_rows(bk, kv, layer, off, hd, c1, nkv[i], qp + i, 1, s.scale, sp + i,
                                buf);
                }
                bk.softmax(sp[i] + lo[i], nkv[i] - lo[i]);
                std::memset(op[i], 0, sizeof(float) * hd);
                const int head_end = shared ? c0 : nkv[i];
                if (lo[i] < head_end)
                    pv_rows(bk, kv, layer, off, hd, lo[i], head_end, sp + i, 1, op + i, buf);
            }
            if (!shared) continue;
            pv_rows(bk, kv, layer, off, hd, c0, c1, sp, nq, op, buf);
            for (int i = 0; i < nq; ++i) {
                if (nkv[i] > c1)
                    pv_rows(bk, kv, layer, off, hd, c1, nkv[i], sp + i, 1, op + i, buf);
            }
        }
    };
    if (parallel) {
        pool.run(work);
    } else {
        work(0, 1);
    }
}

}  // namespace

size_t attention_scratch_floats(const AttentionShape& s, int n_ctx, int n_threads) {
    return static_cast<size_t>(n_threads) *
           (kBlockQueries * static_cast<size_t>(n_ctx) + kChunkRows * size_t(s.head_dim));
}

void attention(const KVCache& kv, int layer, int pos0, int ntok, const float* q, float* out,
               const AttentionShape& s, ThreadPool& pool, float* scores) {
    // Waking the workers costs more than a few thousand multiply-adds: small jobs run inline.
    // Each pair is computed the same way either way, so this choice never changes results.
    const int64_t flops = static_cast<int64_t>(ntok) * s.n_head * (pos0 + ntok) * s.head_dim * 2;
    const bool parallel = pool.size() > 1 && flops >= kMinParallelFlops;
    if (BlockAttentionKernels bk; block_kernels(s.head_dim, &bk)) {
        attention_blocked(bk, kv, layer, pos0, ntok, q, out, s, pool, scores, parallel);
        return;
    }
    const int group = s.n_head / s.n_head_kv;
    const int64_t ldq = static_cast<int64_t>(s.n_head) * s.head_dim;
    const int64_t n_pairs = static_cast<int64_t>(ntok) * s.n_head;
    const AttentionEntry& kern = attention_kernels();
    auto work = [&](int ith, int nth) {
        float* sc = scores + static_cast<int64_t>(ith) * kv.n_ctx();
        float* buf = row_buffer(scores, ith, pool.size(), kv.n_ctx(), s.head_dim);
        for (int64_t i = ith; i < n_pairs; i += nth) {
            const int t = static_cast<int>(i / s.n_head), h = static_cast<int>(i % s.n_head);
            const int64_t off = t * ldq + static_cast<int64_t>(h) * s.head_dim;
            attend_head(kern, kv, layer, first_row(s, pos0 + t), pos0 + t + 1,
                        (h / group) * s.head_dim, q + off, out + off, s, sc, buf);
        }
    };
    if (parallel) {
        pool.run(work);
    } else {
        work(0, 1);
    }
}

}  // namespace specula
