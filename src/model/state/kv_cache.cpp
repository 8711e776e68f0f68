// KVCache storage (see kv_cache.h).
#include "model/state/kv_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/threadpool.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/policy.h"
#include "kernels/quants.h"
#include "kernels/table.h"

namespace specula {

namespace {

double physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0.0;
}

void store_row(KVType t, const float* src, uint8_t* dst, int n) {
    switch (t) {
        case KVType::F32:
            std::memcpy(dst, src, sizeof(float) * n);
            return;
        case KVType::F16: {
            auto* h = reinterpret_cast<fp16_t*>(dst);
            for (int i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
            return;
        }
        case KVType::Q8_0:
            quantize_row_ggml_cpu(GGMLType::Q8_0, src, dst, n);
            return;
    }
}

// The table's row conversions (kernels/attention.h), chosen once: exact, so the ISA never changes
// a value; null members: the scalar loops below.
const AttentionEntry& row_kernels() {
    static const AttentionEntry k = best_attention();
    return k;
}

void load_row(KVType t, const uint8_t* row, int off, int n, float* out) {
    switch (t) {
        case KVType::F32:
            std::memcpy(out, reinterpret_cast<const float*>(row) + off, sizeof(float) * n);
            return;
        case KVType::F16: {
            const auto* h = reinterpret_cast<const fp16_t*>(row) + off;
            if (const auto f = row_kernels().fp16_to_f32) return f(h, out, n);
            for (int i = 0; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
            return;
        }
        case KVType::Q8_0: {
            const auto* b = reinterpret_cast<const block_q8_0*>(row) + off / QK8_0;
            for (int i = 0, e = off % QK8_0; i < n; ++b, e = 0) {
                const float d = fp16_to_fp32(b->d);
                const int m = std::min(QK8_0 - e, n - i);
                if (const auto f = row_kernels().i8_scale_to_f32)
                    f(b->qs + e, d, out + i, m);
                else
                    for (int k = 0; k < m; ++k) out[i + k] = d * static_cast<float>(b->qs[e + k]);
                i += m;
            }
            return;
        }
    }
}

// n values of es bytes between a transposed key slice (one per line of kKeyBlock) and a row.
void gather_lines(const uint8_t* lines, uint8_t* row, size_t es, int n) {
    for (int i = 0; i < n; ++i)
        std::memcpy(row + size_t(i) * es, lines + size_t(i) * kKeyBlock * es, es);
}
void scatter_lines(const uint8_t* row, uint8_t* lines, size_t es, int n) {
    for (int i = 0; i < n; ++i)
        std::memcpy(lines + size_t(i) * kKeyBlock * es, row + size_t(i) * es, es);
}

}  // namespace

const char* kv_type_name(KVType t) {
    switch (t) {
        case KVType::F32:
            return "f32";
        case KVType::F16:
            return "f16";
        case KVType::Q8_0:
            break;
    }
    return "q8_0";
}

KVType parse_kv_type(std::string_view name, std::string_view flag) {
    for (KVType t : {KVType::F32, KVType::F16, KVType::Q8_0})
        if (name == kv_type_name(t)) return t;
    fail(std::string(flag), " must be f32, f16 or q8_0, got '", std::string(name.substr(0, 32)),
         "'");
}

namespace {

std::vector<KVLayerShape> uniform(int n_layer, int n_embd_kv, int head_dim) {
    return std::vector<KVLayerShape>(size_t(std::max(n_layer, 0)), {n_embd_kv, head_dim});
}

int window_of(std::span<const int> windows, size_t il) {
    return il < windows.size() ? windows[il] : 0;
}

}  // namespace

double KVCache::bytes(int n_layer, int n_ctx, int n_embd_kv, KVType type_k, KVType type_v) {
    return bytes(uniform(n_layer, n_embd_kv, 0), n_ctx, type_k, type_v, {}, 0);
}

int KVCache::window_rows(int window, int max_pass, int n_ctx) {
    if (window < 0) return 0;  // a recurrent layer: no cache
    if (window == 0) return n_ctx;
    return int(std::min<int64_t>(n_ctx, int64_t(window) - 1 + std::max(max_pass, 1)));
}

double KVCache::bytes(int n_layer, int n_ctx, int n_embd_kv, KVType type_k, KVType type_v,
                      std::span<const int> windows, int max_pass) {
    return bytes(uniform(n_layer, n_embd_kv, 0), n_ctx, type_k, type_v, windows, max_pass);
}

double KVCache::bytes(std::span<const KVLayerShape> shapes, int n_ctx, KVType type_k, KVType type_v,
                      std::span<const int> windows, int max_pass) {
    double b = 0;
    for (size_t il = 0; il < shapes.size(); ++il) {
        const int w = shapes[il].n_embd_kv;
        const size_t v = shapes[il].v_is_k ? 0 : kv_row_bytes(type_v, w);  // V reads K's rows
        b += double(whole_blocks(size_t(window_rows(window_of(windows, il), max_pass, n_ctx)))) *
             double(kv_row_bytes(type_k, w) + v);
    }
    return b;
}

KVCache::KVCache(int n_layer, int n_ctx, int n_embd_kv, KVType type_k, KVType type_v,
                 std::span<const int> windows, int max_pass, int head_dim, bool small_pages)
    : KVCache(uniform(n_layer, n_embd_kv, head_dim), n_ctx, type_k, type_v, windows, max_pass,
              small_pages) {}

KVCache::KVCache(std::span<const KVLayerShape> shapes, int n_ctx, KVType type_k, KVType type_v,
                 std::span<const int> windows, int max_pass, bool small_pages)
    : n_layer_(int(shapes.size())), n_ctx_(n_ctx), type_k_(type_k), type_v_(type_v) {
    if (n_ctx < 1) fail("n_ctx must be >= 1, got ", n_ctx);
    size_t k_bytes = 0, v_bytes = 0;
    for (int il = 0; il < n_layer_; ++il) {
        const KVLayerShape sh = shapes[size_t(il)];
        const bool q8 = type_k == KVType::Q8_0 || (!sh.v_is_k && type_v == KVType::Q8_0);
        Layer l;
        l.v_is_k = sh.v_is_k;
        l.width = sh.n_embd_kv;
        l.window = window_of(windows, size_t(il));
        l.rows = window_rows(l.window, max_pass, n_ctx);
        if (q8 && l.rows > 0 && l.width % QK8_0 != 0)
            fail("a q8_0 KV cache needs K/V rows of a multiple of ", QK8_0,
                 " values; this model's are ", l.width, " (use f16)");
        // Head-major where every side can split its rows there (a Q8_0 side: whole blocks per
        // head).
        const int hd = sh.head_dim;
        const bool split = hd > 0 && hd < l.width && l.width % hd == 0 && (!q8 || hd % QK8_0 == 0);
        l.slice = split ? hd : std::max(l.width, 1);
        l.n_slices = std::max(l.width, 1) / l.slice;
        l.k_slice = kv_row_bytes(type_k, l.slice);
        l.v_slice = kv_row_bytes(sh.v_is_k ? type_k : type_v, l.slice);
        l.k_base = k_bytes;
        l.v_base = v_bytes;
        l.ring_first = ring_pos_.size();
        layers_.push_back(l);
        k_bytes += span(il) * l.k_row();
        v_bytes += span(il) * l.v_row();
        if (l.rows > 0 && l.rows < n_ctx) {
            max_pass_ = std::max(max_pass, 1);
            ring_pos_.resize(ring_pos_.size() + size_t(l.rows), -1);
        }
    }
    const double total = double(k_bytes) + double(v_bytes);
    const double limit = physical_memory_bytes();
    if (limit > 0 && total > limit) {
        fail("n_ctx = ", n_ctx, " needs a ", total / (1 << 30), " GiB KV cache, more than the ",
             limit / (1 << 30), " GiB of memory");
    }
    k_buf_ = std::make_unique<PackedBuffer>(k_bytes, PackedBuffer::Pages::small);
    v_buf_ = std::make_unique<PackedBuffer>(v_bytes, PackedBuffer::Pages::small);
    k_ = k_buf_->data();
    v_ = v_buf_->data();
    if (!small_pages && kernel_policy().hugepages) advise_huge_pages();
    tokens_.reserve(size_t(n_ctx));  // appends never allocate (test_speculative_noalloc)
}

// Snapshots hold whole rows: each row gathered from (save) or scattered to (restore) its heads.
size_t KVCache::snapshot_bytes(int n, bool is_k) const {
    size_t b = 0;
    for (const Layer& l : layers_)
        if (l.rows > 0) b += size_t(n) * (is_k ? l.k_row() : l.v_row());
    return b;
}

KVSnapshot KVCache::save(int n, ThreadPool* pool) const {
    if (has_ring()) fail("a KV cache with sliding-window layers cannot be copied out");
    if (n < 0 || n > n_past()) fail("KVCache::save: ", n, " positions of ", n_past());
    const size_t es = kv_row_bytes(type_k_, 1);
    KVSnapshot s;
    s.tokens.assign(tokens_.begin(), tokens_.begin() + n);
    // Uninitialised (SnapshotBytes), every byte written below: the server's prompt cache takes a
    // snapshot as a request waits to start, so it is not zeroed first and the pool copies it.
    s.k.resize(snapshot_bytes(n, true));
    s.v.resize(snapshot_bytes(n, false));
    std::vector<size_t> k_at(size_t(n_layer_) + 1, 0), v_at(size_t(n_layer_) + 1, 0);
    for (int il = 0; il < n_layer_; ++il) {  // layer il's rows follow the layers before it
        const Layer& l = L(il);
        k_at[size_t(il) + 1] = k_at[size_t(il)] + (l.rows > 0 ? size_t(n) * l.k_row() : 0);
        v_at[size_t(il) + 1] = v_at[size_t(il)] + (l.rows > 0 ? size_t(n) * l.v_row() : 0);
    }
    auto layers = [&](int64_t l0, int64_t l1) {
        for (int il = int(l0); il < int(l1); ++il) {
            const Layer& l = L(il);
            if (l.rows == 0) continue;
            uint8_t* k = s.k.data() + k_at[size_t(il)];
            uint8_t* v = s.v.data() + v_at[size_t(il)];
            for (int p = 0; p < n; ++p, k += l.k_row(), v += l.v_row()) {
                const KVCache& c = source(p);  // a shared prefix's rows from its base
                for (int h = 0; h < l.n_slices; ++h) {
                    if (k_transposed())
                        gather_lines(c.k_ + c.k_offset(il, p, h * l.slice),
                                     k + size_t(h) * l.k_slice, es, l.slice);
                    else
                        std::memcpy(k + size_t(h) * l.k_slice, k_bytes(il, p, h * l.slice),
                                    l.k_slice);
                    if (!l.v_is_k)
                        std::memcpy(v + size_t(h) * l.v_slice, v_bytes(il, p, h * l.slice),
                                    l.v_slice);
                }
            }
        }
    };
    if (pool && pool->size() > 1 && n > 0)
        pool->parallel_for(n_layer_, layers);
    else
        layers(0, n_layer_);
    return s;
}

void KVCache::restore(const KVSnapshot& s) {
    const size_t n = s.tokens.size();
    const size_t es = kv_row_bytes(type_k_, 1);
    if (has_ring() || n > size_t(n_ctx_) || s.k.size() != snapshot_bytes(int(n), true) ||
        s.v.size() != snapshot_bytes(int(n), false))
        fail("KVCache::restore: the snapshot (", n, " positions) is not of this cache's shape");
    unshare();  // a shared prefix is left: every row becomes this cache's own
    const uint8_t* k = s.k.data();
    const uint8_t* v = s.v.data();
    for (int il = 0; il < n_layer_; ++il) {
        const Layer& l = L(il);
        if (l.rows == 0) continue;
        for (int p = 0; p < int(n); ++p, k += l.k_row(), v += l.v_row()) {
            for (int h = 0; h < l.n_slices; ++h) {
                if (k_transposed())
                    scatter_lines(k + size_t(h) * l.k_slice, k_ + k_offset(il, p, h * l.slice), es,
                                  l.slice);
                else
                    std::memcpy(k_ + offset(il, p, h * l.slice, true), k + size_t(h) * l.k_slice,
                                l.k_slice);
                if (!l.v_is_k)
                    std::memcpy(v_ + offset(il, p, h * l.slice, false), v + size_t(h) * l.v_slice,
                                l.v_slice);
            }
        }
    }
    tokens_.assign(s.tokens.begin(), s.tokens.end());  // within the reserved n_ctx
    touched_ = std::max(touched_, n_past());
}

int KVCache::common_prefix(std::span<const token_id> t) const {
    const size_t n = std::min(t.size(), tokens_.size());
    size_t k = 0;
    while (k < n && tokens_[k] == t[k]) ++k;
    return can_keep(int(k)) ? int(k) : 0;
}

// A pass at position n reads positions [n - w + 1, n) of a ring layer: each row must still hold
// its position (not a later one of the same row, written before a rollback).
bool KVCache::can_keep(int n) const {
    if (n == 0 || max_pass_ == 0) return true;
    for (int il = n_device_; il < n_layer_; ++il) {
        const int r = L(il).rows;
        if (r == n_ctx_ || r == 0) continue;
        const int* held = ring_pos_.data() + L(il).ring_first;
        for (int p = std::max(0, n - L(il).window + 1); p < n; ++p)
            if (held[p % r] != p) return false;
    }
    return true;
}

// A head's run of rows fills from its start, so a huge page there would be committed (zeroed) whole
// by the first position written: with head-major rows that is one 2 MiB page per head, layer and
// side (an 8B model's 576: 1.15 GB zeroed and resident for a one-token prompt). The first 2 MiB of
// each run stay on 4 KiB pages (committed as positions are written: 8,192 positions of a 128-value
// F16 head); past them, where a long context streams the run, huge pages.
void KVCache::advise_huge_pages() {
    for (int il = 0; il < n_layer_; ++il) {
        const Layer& l = L(il);
        const size_t rows = span(il);
        for (int h = 0; h < l.n_slices; ++h) {
            const size_t k0 = l.k_base + size_t(h) * rows * l.k_slice;
            k_buf_->advise_huge(k0 + PackedBuffer::kHugePage, k0 + rows * l.k_slice);
            if (l.v_is_k) continue;
            const size_t v0 = l.v_base + size_t(h) * rows * l.v_slice;
            v_buf_->advise_huge(v0 + PackedBuffer::kHugePage, v0 + rows * l.v_slice);
        }
    }
}

// Every layer without a ring keeps each head's rows in one run (row-major, or blocks of
// kKeyBlock rows for a transposed key side), so the rows from a key block's start on are the
// run's tail.
void KVCache::release_unused() {
    const size_t from = whole_blocks(size_t(n_past()));
    for (int il = 0; il < n_layer_; ++il) {
        const Layer& l = L(il);
        if (l.rows < n_ctx_ || from >= span(il)) continue;
        for (int h = 0; h < l.n_slices; ++h) {
            const size_t k0 = l.k_base + size_t(h) * span(il) * l.k_slice;
            const size_t v0 = l.v_base + size_t(h) * span(il) * l.v_slice;
            k_buf_->release(k0 + from * l.k_slice, k0 + span(il) * l.k_slice);
            if (!l.v_is_k) v_buf_->release(v0 + from * l.v_slice, v0 + span(il) * l.v_slice);
        }
    }
    touched_ = n_past();
}

void KVCache::share_prefix(std::shared_ptr<KVCache> base, int limit) {
    if (!base || base.get() == this) fail("KVCache::share_prefix: no base cache");
    if (n_past() != 0) fail("KVCache::share_prefix: the cache holds ", n_past(), " positions");
    bool same = base->n_layer_ == n_layer_ && base->n_ctx_ == n_ctx_ && base->type_k_ == type_k_ &&
                base->type_v_ == type_v_;
    for (int il = 0; same && il < n_layer_; ++il)
        same = L(il).width == base->L(il).width && L(il).slice == base->L(il).slice &&
               L(il).rows == base->L(il).rows && L(il).v_is_k == base->L(il).v_is_k;
    if (!same) fail("KVCache::share_prefix: the base is of another shape, type or context");
    if (has_ring() || base->has_ring())
        fail("KVCache::share_prefix: a cache with sliding-window layers cannot share rows");
    if (limit < 0 || limit > n_ctx_) fail("KVCache::share_prefix: limit ", limit, " of ", n_ctx_);
    release_unused();  // this cache's own rows below limit are never read again
    base_ = std::move(base);
    limit_ = limit;
    const int have = std::min(limit, base_->n_past());
    tokens_.assign(base_->tokens_.begin(), base_->tokens_.begin() + have);
    if (limit_ == 0) base_.reset();
}

void KVCache::append_base(std::span<const token_id> t) {
    if (base_->n_past() != n_past())
        fail("KVCache: the shared prefix's base holds ", base_->n_past(), " positions, not ",
             n_past(), ": it has another writer");
    base_->append(t.first(std::min(t.size(), size_t(limit_ - n_past()))));
}

void KVCache::write(int layer, int pos, const float* k, const float* v) {
    if (pos < limit_) {  // a shared prefix: only the rows its base does not hold yet
        if (pos < base_->n_past())
            fail("KVCache: position ", pos, " of a shared prefix is written already (immutable)");
        base_->write(layer, pos, k, v);
        return;
    }
    const Layer& l = L(layer);
    if (l.rows < n_ctx_) ring_pos_[l.ring_first + size_t(pos % l.rows)] = pos;
    for (int h = 0; h < l.n_slices; ++h) {
        const int off = h * l.slice;
        if (k_transposed()) {
            uint8_t* dst = k_ + k_offset(layer, pos, off);
            if (type_k_ == KVType::F32) {
                for (int i = 0; i < l.slice; ++i)
                    reinterpret_cast<float*>(dst)[size_t(i) * kKeyBlock] = k[off + i];
            } else {
                for (int i = 0; i < l.slice; ++i)
                    reinterpret_cast<fp16_t*>(dst)[size_t(i) * kKeyBlock] =
                        fp32_to_fp16(k[off + i]);
            }
        } else {
            store_row(type_k_, k + off, k_ + offset(layer, pos, off, true), l.slice);
        }
        if (!l.v_is_k) store_row(type_v_, v + off, v_ + offset(layer, pos, off, false), l.slice);
    }
}

namespace {

// Readers walk a head's positions in order: the piece kReadAhead positions on is prefetched (in
// whole-row layouts the pieces are a row apart, a stride the hardware prefetchers do not follow
// far enough ahead). An address past the cache is only a hint, never read.
constexpr int kReadAhead = 32;

void prefetch_piece(const uint8_t* p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o);
}

size_t piece_bytes(KVType t, int n) {
    return t == KVType::Q8_0 ? size_t(n) / QK8_0 * sizeof(block_q8_0) + sizeof(block_q8_0)
                             : size_t(n) * (t == KVType::F16 ? 2 : 4);
}

size_t piece_offset(KVType t, int off) {
    return t == KVType::Q8_0 ? size_t(off) / QK8_0 * sizeof(block_q8_0)
                             : size_t(off) * (t == KVType::F16 ? 2 : 4);
}

// Q8_0 values [off, off + n) of rows row(j), j in [j0, j1), as floats: d * q, the product
// i8_scale_to_f32 and the scalar reader compute (so the same bits). Built for AVX-512, AVX2 and
// the baseline (the loops vectorise), one chosen at load.
template <class RowFn>
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void q8_rows(RowFn row, int j0, int j1, int off, int n, float* out) {
    const size_t first = size_t(off) / QK8_0, skip = size_t(off) % QK8_0;
    for (int j = j0; j < j1; ++j, out += n) {
        prefetch_piece(row(j + kReadAhead) + first * sizeof(block_q8_0),
                       piece_bytes(KVType::Q8_0, n));
        const auto* b = reinterpret_cast<const block_q8_0*>(row(j)) + first;
        for (int i = 0, e = int(skip); i < n; ++b, e = 0) {
            const float d = fp16_to_fp32(b->d);
            const int m = std::min(QK8_0 - e, n - i);
            for (int k = 0; k < m; ++k) out[i + k] = d * static_cast<float>(b->qs[e + k]);
            i += m;
        }
    }
}

}  // namespace

void KVCache::read_rows(bool is_k, int layer, int j0, int j1, int off, int n, float* out) const {
    is_k = is_k || L(layer).v_is_k;  // a v_is_k layer's V rows are K's
    if (j0 < limit_) {               // a shared prefix's rows from its base, then the rest
        const int m = std::min(j1, limit_);
        base_->read_rows(is_k, layer, j0, m, off, n, out);
        out += size_t(m - j0) * size_t(n);
        j0 = m;
        if (j0 >= j1) return;
    }
    const int slice = L(layer).slice, base = off / slice * slice;
    if (is_k && k_transposed() && off + n <= base + slice)
        return read_t_rows(layer, j0, j1, off, n, out);
    if ((is_k ? type_k_ : type_v_) != KVType::Q8_0 || off + n > base + slice) {
        for (int j = j0; j < j1; ++j) read(is_k, layer, j, off, n, out + size_t(j - j0) * n);
        return;
    }
    q8_rows([&](int j) { return is_k ? k_bytes(layer, j, base) : v_bytes(layer, j, base); }, j0, j1,
            off - base, n, out);
}

// Key block by key block: each line of kKeyBlock values (one value of the block's rows) widened at
// once (exactly, as read() widens one value) and spread over the rows (a v_is_k layer's V rows,
// the attention's rows of a head too wide for the blocked kernels).
void KVCache::read_t_rows(int layer, int j0, int j1, int off, int n, float* out) const {
    const size_t es = kv_row_bytes(type_k_, 1), line_bytes = es * kKeyBlock;
    const auto widen = row_kernels().fp16_to_f32;
    float line[kKeyBlock];
    for (int j = j0; j < j1;) {
        const int lane = row(layer, j) % kKeyBlock;
        const int m = std::min(run(layer, j, j1 - j), kKeyBlock - lane);  // rows of this block
        const uint8_t* e = k_ + k_offset(layer, j, off);
        float* o = out + size_t(j - j0) * size_t(n);
        for (int d = 0; d < n; ++d, e += line_bytes) {
            if (type_k_ == KVType::F32) {
                std::memcpy(line, e, sizeof(float) * size_t(m));
            } else if (widen) {
                widen(reinterpret_cast<const fp16_t*>(e), line, m);
            } else {
                for (int i = 0; i < m; ++i) {
                    fp16_t h;
                    std::memcpy(&h, e + size_t(i) * es, sizeof(h));
                    line[i] = fp16_to_fp32(h);
                }
            }
            for (int i = 0; i < m; ++i) o[size_t(i) * size_t(n) + size_t(d)] = line[i];
        }
        j += m;
    }
}

// Head by head (a read may span several), each from its head's start (a Q8_0 block's).
void KVCache::read(bool is_k, int layer, int pos, int off, int n, float* out) const {
    if (pos < limit_) return base_->read(is_k, layer, pos, off, n, out);
    is_k = is_k || L(layer).v_is_k;  // a v_is_k layer's V rows are K's
    const KVType t = is_k ? type_k_ : type_v_;
    const int slice = L(layer).slice;
    if (is_k && k_transposed()) {  // one value per line of the row's block
        for (int i = 0; i < n;) {
            const int at = off + i, m = std::min(n - i, (at / slice + 1) * slice - at);
            const uint8_t* e = k_ + k_offset(layer, pos, at);
            for (int c = 0; c < m; ++c, e += kv_row_bytes(t, kKeyBlock)) {
                if (t == KVType::F32) {
                    std::memcpy(out + i + c, e, sizeof(float));
                } else {
                    fp16_t h;
                    std::memcpy(&h, e, sizeof(h));
                    out[i + c] = fp16_to_fp32(h);
                }
            }
            i += m;
        }
        return;
    }
    for (int i = 0; i < n;) {
        const int at = off + i, base = at / slice * slice, m = std::min(n - i, base + slice - at);
        const uint8_t* ahead =
            is_k ? k_bytes(layer, pos + kReadAhead, base) : v_bytes(layer, pos + kReadAhead, base);
        prefetch_piece(ahead + piece_offset(t, at - base), piece_bytes(t, m));
        load_row(t, is_k ? k_bytes(layer, pos, base) : v_bytes(layer, pos, base), at - base, m,
                 out + i);
        i += m;
    }
}

}  // namespace specula
