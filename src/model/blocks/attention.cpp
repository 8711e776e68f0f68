// Attention over the KV cache (see attention.h).
#include "model/blocks/attention.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/ops.h"
#include "kernels/table.h"

namespace specula {

namespace {

constexpr int64_t kMinParallelFlops = 1 << 16;

// Queries per blocked work item at most: P consecutive positions x H query heads of one KV
// head. A block reads its KV head's rows once for all of its queries, so a verify pass of 9
// tokens over a long cache reads the cache once (9 x 2 queries for a group of 2); blocks shrink
// when there would be too few items for the threads (block_shape).
constexpr int kBlockQueries = 64;
// Rows of an F16 / Q8_0 cache dequantized at a time (per thread, head_dim floats each).
constexpr int kChunkRows = 64;

// The attention kernels of the table (kernels/attention.h), chosen once per process: each member
// from the best ISA that has one, the scalar loops of kernels/ops.h where none has.
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

// Thread ith's row buffer, after every thread's scores, and its query buffer (kBlockQueries
// queries), after every thread's row buffer.
float* row_buffer(float* scores, int ith, int n_threads, int n_ctx, int head_dim) {
    return scores + static_cast<size_t>(n_threads) * kBlockQueries * n_ctx +
           static_cast<size_t>(ith) * kChunkRows * head_dim;
}
float* query_buffer(float* scores, int ith, int n_threads, int n_ctx, int head_dim) {
    return row_buffer(scores, n_threads, n_threads, n_ctx, head_dim) +
           static_cast<size_t>(ith) * kBlockQueries * head_dim;
}

// A Q8_0 key cache: each query is rounded to Q8_0 first, block by block as the table's quantizer
// rounds activations, as llama.cpp rounds Q to its keys' dot type. Heads of a multiple of 32 only
// (a head's keys are whole blocks then; llama.cpp takes no other).
bool rounds_queries(const KVCache& kv, int head_dim) {
    return kv.type_k() == KVType::Q8_0 && head_dim % QK8_0 == 0;
}
// The rounded query as KeyQueryQ8 blocks (qq: for the table's integer kernel), or else as the
// floats d * q (qf: for the float kernels).
void round_query(const float* q, int hd, KeyQueryQ8* qq, float* qf) {
    static const QuantizeRowFn quantize = best_quantize_row(GGMLType::Q8_0);
    for (int b = 0; b < hd / QK8_0; ++b) {
        block_q8_0 blk;
        quantize(q + b * QK8_0, &blk, QK8_0);
        const float d = fp16_to_fp32(blk.d);
        if (qq) {
            qq[b].d = d;
            qq[b].sum = 0;
            for (int t = 0; t < QK8_0; ++t) qq[b].sum += blk.qs[t];
            std::memcpy(qq[b].qs, blk.qs, sizeof(blk.qs));
        } else {
            for (int t = 0; t < QK8_0; ++t) qf[b * QK8_0 + t] = d * static_cast<float>(blk.qs[t]);
        }
    }
}

// One query head of one token: softmax(q . K^T * scale) . V over positions [j0, j1). Rows of a
// typed cache are widened into `buf` (kChunkRows rows of head_dim floats) a chunk at a time, the
// same values row by row as one at a time. scores[j] is row j's.
void attend_head(const AttentionEntry& kern, const KVCache& kv, int layer, int j0, int j1,
                 int kv_off, int head, const float* q, float* out, const AttentionShape& s,
                 float* scores, float* buf) {
    const int hd = s.head_dim;
    // In place where the V rows are rows of their own (a v_is_k layer's transposed K: read_v).
    const bool v32 = kv.type_v(layer) == KVType::F32 && kv.v_in_place(layer);
    for (int c0 = j0; c0 < j1; c0 += kChunkRows) {
        const int c1 = std::min(j1, c0 + kChunkRows);
        kv.read_k_rows(layer, c0, c1, kv_off, hd, buf);
        for (int j = c0; j < c1; ++j)
            scores[j] = kern.dot(q, buf + size_t(j - c0) * hd, hd) * s.scale;
    }
    if (s.softcap > 0) softcap(scores + j0, j1 - j0, s.softcap);
    if (s.sinks)
        softmax_sink(scores + j0, j1 - j0, s.sinks[head]);
    else
        softmax(scores + j0, j1 - j0);
    std::memset(out, 0, sizeof(float) * hd);
    for (int c0 = j0; c0 < j1; c0 += kChunkRows) {
        const int c1 = std::min(j1, c0 + kChunkRows);
        if (!v32) kv.read_v_rows(layer, c0, c1, kv_off, hd, buf);
        for (int j = c0; j < c1; ++j)
            kern.axpy(scores[j], v32 ? kv.v(layer, j, kv_off) : buf + size_t(j - c0) * hd, out, hd);
    }
}

// The blocked kernels over cache rows [j0, j1) of the KV head at value offset `off`: in place
// for F32 and F16 sides (F16 widened as loaded; keys in their transposed blocks) and for Q8_0
// sides the kernels read, else dequantized kChunkRows at a time into `buf` (the kernels see the
// chunk as rows [0, n) and the score / probability rows shifted to match). Splitting [j0, j1)
// changes no result (kernels/attention.h), so neither does the cache type's chunking.
// qq: the queries rounded for the table's Q8_0 key kernel (null: q, whatever the cache).
void qk_rows(const BlockAttentionKernels& bk, const KVCache& kv, int layer, int off, int hd, int j0,
             int j1, const float* const* q, const KeyQueryQ8* const* qq, int nq, float scale,
             float* const* s, float* buf) {
    // Q8_0 rows in place, run by run (a ring layer wraps), by the integer kernel for the rounded
    // queries.
    if (qq) {
        float* shifted[kBlockQueries];
        for (int a = j0, m = 0; a < j1; a += m) {
            m = kv.run(layer, a, j1 - a);
            for (int i = 0; i < nq; ++i) shifted[i] = s[i] + a;
            bk.qk_q8(kv.k_bytes(layer, a, off), kv.k_stride_bytes(layer), hd, 0, m, qq, nq, scale,
                     shifted);
        }
        return;
    }
    if (kv.k_transposed()) {
        // In place, run by run in row space (a ring layer's row p % rows), the score rows shifted
        // to match (the split changes no result).
        float* shifted[kBlockQueries];
        const size_t bs = kv.k_block_stride(layer);
        for (int a = j0, m = 0; a < j1; a += m) {
            m = kv.run(layer, a, j1 - a);
            const int r = a % kv.rows(layer);
            for (int i = 0; i < nq; ++i) shifted[i] = s[i] + (a - r);
            const KVCache& src = kv.source(a);  // a shared prefix's rows are its base's
            if (kv.type_k() == KVType::F32)
                bk.qk_t(src.k_t(layer, off), bs, hd, r, r + m, q, nq, scale, shifted);
            else
                bk.qk_th(src.k_t_f16(layer, off), bs, hd, r, r + m, q, nq, scale, shifted);
        }
        return;
    }
    float* shifted[kBlockQueries];
    for (int c0 = j0; c0 < j1; c0 += kChunkRows) {
        const int c1 = std::min(j1, c0 + kChunkRows);
        kv.read_k_rows(layer, c0, c1, off, hd, buf);
        for (int i = 0; i < nq; ++i) shifted[i] = s[i] + c0;
        bk.qk(buf, size_t(hd), hd, 0, c1 - c0, q, nq, scale, shifted);
    }
}

void pv_rows(const BlockAttentionKernels& bk, const KVCache& kv, int layer, int off, int hd, int j0,
             int j1, const float* const* p, int nq, float* const* out, float* buf) {
    // A v_is_k layer's V rows are its K rows (model/state/kv_cache.h): in place where K is not
    // transposed (Q8_0), else widened through read_v_rows below, the same values (pv_h and
    // pv_q8 give pv's results on the widened rows).
    const KVType tv = kv.type_v(layer);
    const bool in_place = kv.v_in_place(layer);
    if (tv == KVType::Q8_0 && bk.pv_q8 && off % QK8_0 == 0) {  // in place, run by run
        const float* shifted[kBlockQueries];
        for (int a = j0, m = 0; a < j1; a += m) {
            m = kv.run(layer, a, j1 - a);
            for (int i = 0; i < nq; ++i) shifted[i] = p[i] + a;
            bk.pv_q8(kv.v_bytes(layer, a, off), kv.v_stride_bytes(layer), hd, 0, m, shifted, nq,
                     out);
        }
        return;
    }
    if (kv.rows(layer) < kv.n_ctx() && tv != KVType::Q8_0 && in_place) {
        const float* shifted[kBlockQueries];
        for (int a = j0, m = 0; a < j1; a += m) {
            m = kv.run(layer, a, j1 - a);
            for (int i = 0; i < nq; ++i) shifted[i] = p[i] + a;
            if (tv == KVType::F32)
                bk.pv(kv.v(layer, a, off), size_t(kv.stride(layer)), hd, 0, m, shifted, nq, out);
            else
                bk.pv_h(kv.v_f16(layer, a, off), size_t(kv.stride(layer)), hd, 0, m, shifted, nq,
                        out);
        }
        return;
    }
    if (tv != KVType::Q8_0 && in_place) {
        // In place from row 0's pointer: a shared prefix's rows from its base's, then the rest,
        // in row order (the split changes no result).
        for (int a = j0, e = 0; a < j1; a = e) {
            e = a < kv.shared() ? std::min(j1, kv.shared()) : j1;
            const KVCache& src = kv.source(a);
            const uint8_t* v0 = src.v_own(layer, off);
            if (tv == KVType::F32)
                bk.pv(reinterpret_cast<const float*>(v0), size_t(kv.stride(layer)), hd, a, e, p, nq,
                      out);
            else
                bk.pv_h(reinterpret_cast<const uint16_t*>(v0), size_t(kv.stride(layer)), hd, a, e,
                        p, nq, out);
        }
        return;
    }
    const float* shifted[kBlockQueries];
    for (int c0 = j0; c0 < j1; c0 += kChunkRows) {
        const int c1 = std::min(j1, c0 + kChunkRows);
        kv.read_v_rows(layer, c0, c1, off, hd, buf);
        for (int i = 0; i < nq; ++i) shifted[i] = p[i] + c0;
        bk.pv(buf, size_t(hd), hd, 0, c1 - c0, shifted, nq, out);
    }
}

struct BlockShape {
    int heads;      // H: query heads of the group per item
    int positions;  // P
    int head_chunks;
};

// The largest blocks that still give every thread two items or more (items of equal size are
// not equal work: their positions see different numbers of rows): fewer positions first, then
// fewer heads of the group (MLA's one KV head of 20 or more query heads in a 1-token pass), each
// item reading the rows again. Results never depend on it.
BlockShape block_shape(const AttentionShape& s, int ntok, int n_threads) {
    const int group = s.n_head / s.n_head_kv;
    int h = std::min(group, kBlockQueries);
    int p = std::max(1, kBlockQueries / h);
    auto items = [&](int pp, int hh) {
        return int64_t(s.n_head_kv) * ((group + hh - 1) / hh) * ((ntok + pp - 1) / pp);
    };
    while (p > 1 && items(p, h) < 2 * n_threads) p = (p + 1) / 2;
    while (h > 1 && items(p, h) < n_threads) h = (h + 1) / 2;
    return {h, p, (group + h - 1) / h};
}

// The first ISA's blocked kernels that cover head_dim (kernels/table.h).
bool block_kernels(int head_dim, BlockAttentionKernels* k) {
    if (!best_blocked_attention(head_dim, k)) return false;
    if (!k->softmax) k->softmax = softmax_row;  // the ISA has none of its own
    return true;
}

// The blocked path: work items of up to kBlockQueries queries sharing one KV head, handed out
// from a counter (the items with the most positions first). Each query's scores, softmax and
// weighted sum are the same operations whatever its item holds: the rows every query of the block
// sees, [c0, c1) = [the last query's first row, the first query's end), go through the kernels for
// all of its queries at once, each query's own rows before (a window's head) and after (its tail)
// through the same kernels alone; the weighted sum always runs head, common, tail, i.e. in row
// order, so a query's sum is the same whatever the split.
void attention_blocked(const BlockAttentionKernels& bk, const KVCache& kv, int layer, int pos0,
                       int ntok, const float* q, float* out, const AttentionShape& s,
                       ThreadPool& pool, float* scores, bool parallel) {
    const BlockShape b = block_shape(s, ntok, parallel ? pool.size() : 1);
    const int group = s.n_head / s.n_head_kv, hd = s.head_dim;
    const int64_t ldq = static_cast<int64_t>(s.n_head) * hd;
    const int n_blocks = (ntok + b.positions - 1) / b.positions;
    const bool round_q = rounds_queries(kv, hd), int_q = round_q && bk.qk_q8;
    const int64_t per_block = static_cast<int64_t>(s.n_head_kv) * b.head_chunks;
    const int64_t n_items = per_block * n_blocks;
    std::atomic<int64_t> next{0};
    auto work = [&](int ith, int) {
        float* sc = scores + static_cast<int64_t>(ith) * kBlockQueries * kv.n_ctx();
        float* buf = row_buffer(scores, ith, pool.size(), kv.n_ctx(), hd);
        float* qr = query_buffer(scores, ith, pool.size(), kv.n_ctx(), hd);
        const float* qp[kBlockQueries];
        const KeyQueryQ8* qq[kBlockQueries];
        float* op[kBlockQueries];
        float* sp[kBlockQueries];
        int lo[kBlockQueries], hi[kBlockQueries], head[kBlockQueries];
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
                    head[nq] = h;
                    lo[nq] = first_visible(pos0 + t, s.window);
                    hi[nq] = pos0 + t + 1;
                }
            }
            if (round_q) {
                for (int i = 0; i < nq; ++i) {
                    if (int_q) {
                        auto* blocks = reinterpret_cast<KeyQueryQ8*>(qr) + i * (hd / QK8_0);
                        round_query(qp[i], hd, blocks, nullptr);
                        qq[i] = blocks;
                    } else {
                        round_query(qp[i], hd, nullptr, qr + i * hd);
                        qp[i] = qr + i * hd;
                    }
                }
            }
            const KeyQueryQ8* const* qqs = int_q ? qq : nullptr;
            const int off = g * hd;
            const int c0 = first_visible(pos0 + t1 - 1, s.window);
            const int c1 = std::max(c0, pos0 + t0 + 1);
            // Query i's rows: head [lo, min(c0, hi)), common [c0, c1), tail [max(c1, lo), hi).
            auto head_end = [&](int i) { return std::min(c0, hi[i]); };
            auto tail_begin = [&](int i) { return std::max(c1, lo[i]); };
            if (c1 > c0) qk_rows(bk, kv, layer, off, hd, c0, c1, qp, qqs, nq, s.scale, sp, buf);
            for (int i = 0; i < nq; ++i) {
                if (head_end(i) > lo[i])
                    qk_rows(bk, kv, layer, off, hd, lo[i], head_end(i), qp + i,
                            qqs ? qqs + i : nullptr, 1, s.scale, sp + i, buf);
                if (hi[i] > tail_begin(i))
                    qk_rows(bk, kv, layer, off, hd, tail_begin(i), hi[i], qp + i,
                            qqs ? qqs + i : nullptr, 1, s.scale, sp + i, buf);
                if (s.softcap > 0) softcap(sp[i] + lo[i], hi[i] - lo[i], s.softcap);
                if (s.sinks)
                    softmax_sink(sp[i] + lo[i], hi[i] - lo[i], s.sinks[head[i]]);
                else
                    bk.softmax(sp[i] + lo[i], hi[i] - lo[i]);
                std::memset(op[i], 0, sizeof(float) * hd);
                if (head_end(i) > lo[i])
                    pv_rows(bk, kv, layer, off, hd, lo[i], head_end(i), sp + i, 1, op + i, buf);
            }
            if (c1 > c0) pv_rows(bk, kv, layer, off, hd, c0, c1, sp, nq, op, buf);
            for (int i = 0; i < nq; ++i) {
                if (hi[i] > tail_begin(i))
                    pv_rows(bk, kv, layer, off, hd, tail_begin(i), hi[i], sp + i, 1, op + i, buf);
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
    return static_cast<size_t>(n_threads) * (kBlockQueries * static_cast<size_t>(n_ctx) +
                                             (kChunkRows + kBlockQueries) * size_t(s.head_dim));
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
        float* qr = query_buffer(scores, ith, pool.size(), kv.n_ctx(), s.head_dim);
        for (int64_t i = ith; i < n_pairs; i += nth) {
            const int t = static_cast<int>(i / s.n_head), h = static_cast<int>(i % s.n_head);
            const int64_t off = t * ldq + static_cast<int64_t>(h) * s.head_dim;
            const float* qh = q + off;
            if (rounds_queries(kv, s.head_dim)) {
                round_query(qh, s.head_dim, nullptr, qr);
                qh = qr;
            }
            attend_head(kern, kv, layer, first_visible(pos0 + t, s.window), pos0 + t + 1,
                        (h / group) * s.head_dim, h, qh, out + off, s, sc, buf);
        }
    };
    if (parallel) {
        pool.run(work);
    } else {
        work(0, 1);
    }
}

}  // namespace specula
