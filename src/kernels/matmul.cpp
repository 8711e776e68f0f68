// matmul / matmul_multi: quantize the activations once (rounded as llama.cpp's x86 CPU backend
// does, so logits can match it to the last bits; for the Q8_0-activation formats the block scales
// are also converted to floats once, for the SIMD kernels' VecDotQ8Fn entry), then split the
// weight rows (of one or several weights) into chunks of about 64 KiB. Each thread first streams
// its own contiguous run of chunks, then the last few chunks go to whichever thread asks first, so
// a thread that starts late or loses its core for a while just takes fewer of them. Within a chunk,
// tokens go in groups small enough for their activations to stay in L1/L2, and each (row,
// token-group) pair is one kernel call that streams the row once for all tokens of the group. Every
// output is produced by the same kernel with the same per-token operation order, so results do not
// depend on ntok, on the tiling or on the thread count.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>

#include "common/error.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/layout/repack_float.h"
#include "kernels/layout/repack_k.h"
#include "kernels/policy.h"
#include "kernels/quants.h"
#include "kernels/repack.h"
#include "kernels/table.h"

namespace specula {

namespace {

constexpr int kTokenChunk = 16;              // tokens per kernel call
constexpr size_t kRowTileBytes = 64 * 1024;  // weight bytes per row tile

void check_weight(const WeightView& W) {
    const auto& tr = type_traits(W.type);
    if (!tr.supported) {
        fail("matmul: weight type ", static_cast<uint32_t>(W.type), " (",
             tr.name.empty() ? "unknown" : tr.name, ") is not supported");
    }
    if (W.cols <= 0 || W.cols % tr.block_size != 0) {
        fail("matmul: ", tr.name, " weight has ", W.cols, " columns, not a positive multiple of ",
             tr.block_size);
    }
    if (W.rows < 0 || (W.rows > 0 && W.data == nullptr)) {
        fail("matmul: ", tr.name, " weight with ", W.rows, " rows has no data");
    }
    const int64_t act_block = type_traits(vec_dot_type(W.type)).block_size;
    if (W.cols % act_block != 0) {
        fail("matmul: ", tr.name, " weight has ", W.cols, " columns; its activation type needs a ",
             "multiple of ", act_block);
    }
}

// A weight's kernels from the table (kernels/table.h), and where its activations are.
struct Chosen {
    VecDotFn dot = nullptr;
    VecDotQ8Fn dot_q8 = nullptr;    // used instead of dot when set and Acts::scales is given
    VecDotRows2Fn rows2 = nullptr;  // when set, used for pairs of rows (same results as dot)
    FloatRowsFn rows = nullptr;     // used instead of dot when set: all rows and tokens at once
    PackedTileFn packed = nullptr;  // W.packed's tile kernel: used instead of all when set
    PackedPairFn pair = nullptr;    // with packed: for two whole tiles at once (same bits)
    int many_min = 0;               // rows2 / pair: for passes of at least this many tokens
};
struct Acts {
    const uint8_t* data;
    size_t stride;        // bytes per token
    const float* scales;  // float block scales for dot_q8 (see convert_act_scales), or nullptr
    int ntok;
    PackedActs packed;  // for packed weights (its sums are set when a weight is packed)
};

// Rows [r0, r1) of a packed weight: each tile they touch is one kernel call per block of up to
// kPackTokenBlock tokens, token blocks outermost, so that a prompt's activations are read from
// L2 once per block rather than once per tile (the chunk's tiles stay in L2 meanwhile).
constexpr int kPackTokenBlock = 32;

void packed_rows(PackedTileFn fn, PackedPairFn pair, int pair_min, const WeightView& W,
                 const Acts& a, int64_t r0, int64_t r1, float* y, int64_t ldy) {
    const size_t tb = packed_tile_bytes(W.type, W.cols);
    const bool kq = kq_repackable(W.type);
    // A float panel kernel call is one activation chunk (repack_float.h), small enough for the
    // chunk's activations and a panel to share L2.
    const int block = float_repackable(W.type) ? kFloatChunk : kPackTokenBlock;
    for (int t0 = 0; t0 < a.ntok; t0 += block) {
        const int nt = std::min(block, a.ntok - t0);
        PackedActs pa = a.packed;
        if (kq) {
            pa = kq_acts_from(pa, t0);
        } else {
            pa.q += t0 * pa.stride;
            pa.d += t0 * pa.nb;
            pa.corr += t0 * pa.nb;
        }
        for (int64_t tile = r0 / kPackRows; tile * kPackRows < r1; ++tile) {
            const int64_t base = tile * kPackRows;
            if (pair && nt >= pair_min && base >= r0 && base + 2 * kPackRows <= r1) {
                pair(W.packed + tile * tb, tb, pa, nt, y + t0 * ldy + (base - r0), ldy);
                ++tile;
                continue;
            }
            const int lo = static_cast<int>(std::max(r0, base) - base);
            const int hi = static_cast<int>(std::min(r1, base + kPackRows) - base);
            fn(W.packed + tile * tb, pa, nt, lo, hi, y + t0 * ldy + (base + lo - r0), ldy);
        }
    }
}

// Rows per row tile: about kRowTileBytes of weights; for the float kernels (Chosen::rows) a
// multiple of kFloatRowMultiple, so that they run whole register tiles (8 rows x 1 token, 4 x up
// to 6) rather than a 1-row tail each time (the FFN-down rows of a 2048-wide model are 11 KiB at
// F16: 5 rows per 64 KiB made every fifth row a 1 x 6 tile, measured 15% slower per weight).
constexpr int64_t kFloatRowMultiple = 8;
int64_t rows_per_tile(const Chosen& k, const WeightView& W) {
    const int64_t t = std::max<int64_t>(1, static_cast<int64_t>(kRowTileBytes / W.row_bytes()));
    return k.rows ? (t + kFloatRowMultiple - 1) / kFloatRowMultiple * kFloatRowMultiple : t;
}

void rows_with_kernel(const Chosen& k, const WeightView& W, const Acts& a, int64_t r0, int64_t r1,
                      float* y, int64_t ldy) {
    if (k.packed) return packed_rows(k.packed, k.pair, k.many_min, W, a, r0, r1, y, ldy);
    const size_t rb = W.row_bytes();
    const int64_t tile = rows_per_tile(k, W);
    const bool q8 = k.dot_q8 && a.scales;
    float out[kTokenChunk];
    for (int64_t tr0 = r0; tr0 < r1; tr0 += tile) {
        const int64_t tr1 = std::min(r1, tr0 + tile);
        if (k.rows) {  // the kernel tiles rows and tokens itself (same bits as k.dot)
            k.rows(W.cols, W.row(tr0), rb, static_cast<int>(tr1 - tr0), a.data, a.stride, a.ntok,
                   y + (tr0 - r0), ldy);
            continue;
        }
        for (int t0 = 0; t0 < a.ntok; t0 += kTokenChunk) {
            const int nt = std::min(kTokenChunk, a.ntok - t0);
            const uint8_t* at = a.data + static_cast<size_t>(t0) * a.stride;
            int64_t r = tr0;
            if (k.rows2 && nt >= k.many_min) {  // row pairs, same bits as k.dot row by row
                for (; r + 1 < tr1; r += 2) {
                    k.rows2(W.cols, W.row(r), rb, at, a.stride, nt, y + t0 * ldy + (r - r0),
                            static_cast<size_t>(ldy));
                }
            }
            for (; r < tr1; ++r) {
                if (q8) {
                    k.dot_q8(W.cols, W.row(r), at, a.stride,
                             a.scales + static_cast<size_t>(t0) * (W.cols / QK8_0), kTokenChunk, nt,
                             out);
                } else {
                    k.dot(W.cols, W.row(r), at, a.stride, nt, out);
                }
                for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + (r - r0)] = out[t];
            }
        }
    }
}

Chosen kernel_for(const WeightView& W) {
    if (W.packed && !repackable(W.type)) fail("matmul: a packed ", type_name(W.type), " weight");
    const IsaChain chain = active_isa_chain();
    const Layout layout = W.packed ? Layout::Packed : Layout::Rows;
    const Kernel* any = find_kernel(W.type, layout, TokenClass::Any, chain);
    if (!any) fail("matmul: no kernel for weight type ", type_name(W.type));
    const Kernel* many = find_kernel(W.type, layout, TokenClass::Many, chain);
    if (W.packed && !kernel_policy().packed_pair) many = nullptr;
    Chosen k;
    if (W.packed) {
        k.packed = any->tile;
        if (many) k.pair = many->pair;
    } else {
        k.dot = any->dot;
        k.dot_q8 = vec_dot_type(W.type) == GGMLType::Q8_0 ? any->dot_q8 : nullptr;
        k.rows = any->rows;
        if (many) k.rows2 = many->rows2;
    }
    k.many_min = many ? many->min_tokens : 0;
    return k;
}

// The Q8_0 activations' block scales as floats, laid out per chunk of kTokenChunk tokens as
// [chunk][block][token of the chunk] (a kernel call reads one chunk: its group's scales of a block
// are adjacent, and a block's scales share a cache line), plus 8 floats of padding (the kernels
// load a group's scales 4 or 8 at a time).
const float* convert_act_scales(const uint8_t* acts, size_t stride, int64_t cols, int ntok,
                                MatmulScratch& scratch) {
    const int64_t nb = cols / QK8_0;
    const size_t chunks = static_cast<size_t>((ntok + kTokenChunk - 1) / kTokenChunk);
    const size_t need = chunks * nb * kTokenChunk + 8;
    if (scratch.act_scales.size() < need) scratch.act_scales.resize(need);
    float* s = scratch.act_scales.data();
    for (int t = 0; t < ntok; ++t) {
        const auto* b = reinterpret_cast<const block_q8_0*>(acts + t * stride);
        float* st = s + static_cast<size_t>(t / kTokenChunk) * nb * kTokenChunk + t % kTokenChunk;
        for (int64_t ib = 0; ib < nb; ++ib) st[ib * kTokenChunk] = fp16_to_fp32(b[ib].d);
    }
    std::fill(s + need - 8, s + need, 0.0f);
    return s;
}

size_t quantize_rows(GGMLType weight_type, const float* x, int64_t ldx, int64_t cols, int ntok,
                     MatmulScratch& scratch, ThreadPool* pool) {
    const GGMLType at = vec_dot_type(weight_type);
    const size_t stride = row_size(at, cols);
    const size_t need = stride * static_cast<size_t>(std::max(ntok, 0));
    if (scratch.acts.size() < need) scratch.acts.resize(need);
    const QuantizeRowFn quantize = best_quantize_row(at);
    if (!quantize) fail("quantize_acts: no quantizer for activation type ", type_name(at));
    uint8_t* out = scratch.acts.data();
    auto rows = [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) quantize(x + t * ldx, out + t * stride, cols);
    };
    // Each token is one row quantized on its own: the split changes no byte. Only prompt-sized
    // passes (>= 64K values) are split: below, the work is a few microseconds and one more wake-up
    // of the pool costs as much on a loaded machine (a 9-token Q8_0 pass measured slower split).
    if (pool && pool->size() > 1 && ntok > 1 && cols * ntok >= (int64_t{1} << 16)) {
        pool->parallel_for(ntok, rows);
    } else {
        rows(0, ntok);
    }
    return stride;
}

}  // namespace

PackedActs packed_acts(GGMLType wt, const uint8_t* acts, size_t stride, int64_t cols, int ntok,
                       std::vector<float>& d, std::vector<int32_t>& corr, std::vector<uint8_t>& q) {
    if (float_repackable(wt)) {  // the F16 / BF16 rows widened to floats, in q
        q.resize(std::max(q.size(), static_cast<size_t>(cols) * ntok * sizeof(float)));
        return float_prepare_acts(wt, acts, stride, cols, ntok, reinterpret_cast<float*>(q.data()));
    }
    if (vec_dot_type(wt) == GGMLType::Q8_K) {
        q.resize(std::max(q.size(), kq_act_bytes(cols, ntok)));
        d.resize(std::max(d.size(), kq_act_floats(cols, ntok)));
        corr.resize(std::max(corr.size(), kq_act_corrs(cols, ntok)));
        return kq_prepare_acts(acts, stride, cols, ntok, q.data(), d.data(), corr.data());
    }
    const int64_t nb = cols / QK8_0;
    const size_t need = static_cast<size_t>(nb) * ntok;
    if (d.size() < need) d.resize(need);
    if (corr.size() < need) corr.resize(need);
    packed_act_sums(acts, stride, nb, ntok, d.data(), corr.data());
    PackedActs a{acts, stride, d.data(), corr.data(), nb};
    if (ntok >= 2 && ntok <= kBlockRecordTokens) {  // one token has one pointer already
        q.resize(std::max(q.size(), block_record_bytes(ntok) * static_cast<size_t>(nb)));
        packed_act_records(a, ntok, q.data());
        a.records = q.data();
        a.record_tokens = ntok;
    }
    return a;
}

size_t quantize_acts(GGMLType weight_type, const float* x, int64_t ldx, int64_t cols, int ntok,
                     MatmulScratch& scratch) {
    return quantize_rows(weight_type, x, ldx, cols, ntok, scratch, nullptr);
}
size_t quantize_acts(GGMLType weight_type, const float* x, int64_t ldx, int64_t cols, int ntok,
                     MatmulScratch& scratch, ThreadPool& pool) {
    return quantize_rows(weight_type, x, ldx, cols, ntok, scratch, &pool);
}

void matmul_rows(const WeightView& W, const uint8_t* acts, size_t act_stride, int ntok, int64_t r0,
                 int64_t r1, float* y, int64_t ldy) {
    check_weight(W);
    if (r0 < 0 || r1 > W.rows || r0 > r1) {
        fail("matmul_rows: rows [", r0, ", ", r1, ") outside the weight's ", W.rows, " rows");
    }
    if (ntok <= 0 || r0 == r1) return;
    // No float scales here (no scratch): the VecDotFn kernel, which gives the same bits.
    Acts a{acts, act_stride, nullptr, ntok, {}};
    std::vector<float> d;
    std::vector<int32_t> corr;
    std::vector<uint8_t> q;
    if (W.packed) a.packed = packed_acts(W.type, acts, act_stride, W.cols, ntok, d, corr, q);
    rows_with_kernel(kernel_for(W), W, a, r0, r1, y, ldy);
}

void matmul_multi(std::span<const MatmulJob> jobs, const float* x, int64_t ldx, int ntok,
                  ThreadPool& pool, MatmulScratch& scratch) {
    constexpr size_t kMaxJobs = 8;  // per pass; more are split into several passes
    if (jobs.size() > kMaxJobs) {
        for (size_t i = 0; i < jobs.size(); i += kMaxJobs) {
            matmul_multi(jobs.subspan(i, std::min(kMaxJobs, jobs.size() - i)), x, ldx, ntok, pool,
                         scratch);
        }
        return;
    }
    if (jobs.empty()) return;
    bool same_acts = true;
    for (const MatmulJob& j : jobs) {
        check_weight(j.W);
        if (j.W.cols != jobs[0].W.cols) {
            fail("matmul_multi: weights with ", jobs[0].W.cols, " and ", j.W.cols,
                 " columns cannot share an input");
        }
        if (j.W.rows > 0 && j.y == nullptr) fail("matmul_multi: a weight has no output buffer");
        if (ntok > 1 && j.ldy < j.W.rows) {
            fail("matmul: output stride ", j.ldy, " is smaller than the ", j.W.rows, " rows");
        }
        same_acts = same_acts && vec_dot_type(j.W.type) == vec_dot_type(jobs[0].W.type);
    }
    if (!same_acts) {
        for (const MatmulJob& j : jobs) matmul_multi({&j, 1}, x, ldx, ntok, pool, scratch);
        return;
    }
    if (ntok <= 0) return;
    if (x == nullptr || (ntok > 1 && ldx < jobs[0].W.cols)) {
        fail("matmul: input stride ", ldx, " is smaller than the ", jobs[0].W.cols, " columns");
    }
    const size_t stride =
        quantize_acts(jobs[0].W.type, x, ldx, jobs[0].W.cols, ntok, scratch, pool);
    const uint8_t* acts = scratch.acts.data();

    struct Part {
        Chosen k;
        int64_t chunk;  // rows per chunk
        int64_t first;  // id of its first chunk
    };
    Part parts[kMaxJobs + 1];
    int64_t total = 0;
    bool any_q8 = false, any_packed = false;
    for (size_t i = 0; i < jobs.size(); ++i) {
        const WeightView& W = jobs[i].W;
        const Chosen k = kernel_for(W);
        const int64_t tile = rows_per_tile(k, W);
        int64_t chunk = std::max<int64_t>(1, std::min(tile, W.rows / (8 * pool.size())));
        if (k.rows) chunk = (chunk + kFloatRowMultiple - 1) / kFloatRowMultiple * kFloatRowMultiple;
        if (W.packed) {  // whole tiles; a prompt's chunks as large as L2 allows (packed_rows)
            if (ntok > kPackTokenBlock)
                chunk = std::min<int64_t>(8 * kPackRows, W.rows / (4 * pool.size()));
            const int64_t unit = k.pair && ntok >= k.many_min ? 2 * kPackRows : kPackRows;
            chunk = std::max<int64_t>(unit, (chunk + unit - 1) / unit * unit);
        }
        parts[i] = {k, chunk, total};
        any_q8 = any_q8 || parts[i].k.dot_q8;
        any_packed = any_packed || parts[i].k.packed;
        total += (W.rows + chunk - 1) / chunk;
    }
    parts[jobs.size()].first = total;
    Acts a{acts,
           stride,
           any_q8 ? convert_act_scales(acts, stride, jobs[0].W.cols, ntok, scratch) : nullptr,
           ntok,
           {}};
    if (any_packed) {
        a.packed = packed_acts(jobs[0].W.type, acts, stride, jobs[0].W.cols, ntok, scratch.packed_d,
                               scratch.packed_corr, scratch.packed_q);
    }
    auto run_chunk = [&](int64_t id, size_t& j) {
        while (id >= parts[j + 1].first) ++j;  // ids only grow, so j only moves forward
        const MatmulJob& job = jobs[j];
        const int64_t b = (id - parts[j].first) * parts[j].chunk;
        const int64_t e = std::min(job.W.rows, b + parts[j].chunk);
        rows_with_kernel(parts[j].k, job.W, a, b, e, job.y + b, job.ldy);
    };

    // Thread i streams chunks [i * per, (i + 1) * per) in order (one contiguous stretch of weight
    // memory: the hardware prefetchers see one long stream); the rest are shared from a counter.
    const int nth = pool.size();
    const int64_t per = total * 7 / 8 / nth;
    std::atomic<int64_t> next{per * nth};
    pool.run([&](int ith, int) {
        size_t j = 0;
        for (int64_t id = ith * per; id < (ith + 1) * per; ++id) run_chunk(id, j);
        j = 0;
        for (int64_t id; (id = next.fetch_add(1, std::memory_order_relaxed)) < total;) {
            run_chunk(id, j);
        }
    });
}

void matmul_stack(const WeightView& W, int n, const float* x, int64_t xs, int ntok, float* y,
                  int64_t ldy, int64_t ys, ThreadPool& pool, MatmulScratch& scratch) {
    check_weight(W);
    if (n <= 0 || W.rows % n != 0)
        fail("matmul_stack: ", W.rows, " rows are not a stack of ", n, " matrices");
    if (ntok <= 0 || W.rows == 0) return;
    if (x == nullptr || xs < W.cols) {
        fail("matmul_stack: input stride ", xs, " is smaller than the ", W.cols, " columns");
    }
    // Row t * n + i of the rounded activations is matrix i's input for token t.
    const size_t s = quantize_acts(W.type, x, xs, W.cols, ntok * n, scratch, pool);
    const uint8_t* acts = scratch.acts.data();
    const Chosen k = kernel_for(stack_slice(W, 0, n));  // every matrix's: the same type and layout
    if (W.packed) {  // each matrix's own sums (the vectors only grow: none after a warm-up)
        const size_t un = static_cast<size_t>(n);
        if (scratch.stack_acts.size() < un) {
            scratch.stack_d.resize(un);
            scratch.stack_corr.resize(un);
            scratch.stack_q.resize(un);
            scratch.stack_acts.resize(un);
        }
        for (size_t i = 0; i < un; ++i) {
            scratch.stack_acts[i] =
                packed_acts(W.type, acts + i * s, un * s, W.cols, ntok, scratch.stack_d[i],
                            scratch.stack_corr[i], scratch.stack_q[i]);
        }
    }
    // Work items: whole matrices, or parts of whole tiles when there are fewer matrices than
    // twice the threads.
    const int64_t rows = W.rows / n;
    const int64_t parts = std::min<int64_t>((2 * pool.size() + n - 1) / n, rows);
    const int64_t chunk =
        std::max<int64_t>(1, ((rows + parts - 1) / parts + kPackRows - 1) / kPackRows * kPackRows);
    const int64_t per = (rows + chunk - 1) / chunk, total = per * n;
    std::atomic<int64_t> next{0};
    pool.run([&](int, int) {
        for (int64_t id; (id = next.fetch_add(1, std::memory_order_relaxed)) < total;) {
            const int i = static_cast<int>(id / per);
            const int64_t b = id % per * chunk, e = std::min(rows, b + chunk);
            // No float scales (the VecDotFn kernel, which gives the same bits as dot_q8).
            Acts a{acts + i * s, static_cast<size_t>(n) * s, nullptr, ntok, {}};
            if (W.packed) a.packed = scratch.stack_acts[static_cast<size_t>(i)];
            rows_with_kernel(k, stack_slice(W, i, n), a, b, e, y + i * ys + b, ldy);
        }
    });
}

void matmul(const WeightView& W, const float* x, int64_t ldx, int ntok, float* y, int64_t ldy,
            ThreadPool& pool, MatmulScratch& scratch) {
    const MatmulJob job{W, y, ldy};
    matmul_multi({&job, 1}, x, ldx, ntok, pool, scratch);
}

}  // namespace specula
