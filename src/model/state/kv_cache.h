// The key/value cache of one sequence: for every layer, n_ctx rows of that layer's n_embd_kv
// values (KVLayerShape; most models give every layer the same) for K (stored after RoPE) and
// for V, allocated once (left uninitialised, so untouched rows cost no
// memory). K and V each have a type (llama.cpp's -ctk / -ctv): F32, F16 (llama.cpp's default) or
// Q8_0 (blocks of 32: an F16 scale and 32 int8, as llama.cpp's CPU backend rounds them). A row is
// rounded once, when write() stores it; readers see the same bits whatever the batch. Rows
// [0, n_past) are valid, and the cache records the token at each of them (one copy: the session,
// the server's slots and the draft model read it from here); rollback simply lowers n_past, since
// later evals overwrite rows in place. The constructor throws Error when the cache would not fit in
// memory, or for Q8_0 when n_embd_kv is not a multiple of 32.
//
// Head-major: given head_dim, each layer keeps every KV head's values of all its positions
// together (head h's values of position p at [h][p], head_dim values each), so a pass reading one
// KV head over a long cache streams one contiguous run instead of a 128-byte piece of every 2 KiB
// row (which the memory system serves at under half the bandwidth of a whole stream). Without
// head_dim (or for a Q8_0 side when head_dim is not a multiple of 32) a "head" is the whole row.
//
// An F32 / F16 key side is transposed in blocks of kKeyBlock (16) rows: a block holds value d of
// its 16 rows together, then value d + 1's, so the q.k dot products of 16 positions are 16 lanes of
// one register with no sum across lanes (kernels/attention.h, qk_t), for any number of queries.
// Rows are allocated in whole blocks (a ring's rows too; position p stays in row p % rows).
//
// Readers address values by (layer, position, value offset): rows of V and of a Q8_0 K side step
// by stride() / *_stride_bytes(), a transposed K side by blocks (k_t, k_block_stride); read_k /
// read_v give any span as floats. The layout is never seen outside (snapshots hold whole rows).
//
// Sliding-window layers (model/load/hparams.h HParams::n_swa) keep only what their attention reads:
// a layer of window w holds window_rows(w, max_pass, n_ctx) = min(n_ctx, w - 1 + max_pass) rows as
// a ring (position p in row p % rows). That covers a pass of up to max_pass tokens (its first
// query still sees the w - 1 positions before it while the pass writes its last row) and a
// rollback of up to max_pass positions (the rows the next query reads were not overwritten yet).
// can_keep(n) says whether the rows a pass at n reads still hold their positions (the cache
// records which position each ring row holds); a rollback where they do not is refused
// (Session::rollback) and common_prefix() reports 0 instead.
//
// A layer may declare its V rows to be its K rows (KVLayerShape::v_is_k: deepseek2's MLA, whose
// one cache row per position is both): it keeps K's rows only, so it takes half the memory and
// a pass writes each row once; its V readers read K's rows (of K's type, whatever -ctv says).
//
// A shared prefix (share_prefix): positions [0, shared()) may live in another cache of the same
// shape, types and n_ctx, the `base`, which several caches read at once (the server's prefix
// blocks: server/serving/prefix_blocks.h). Every reader (the pointers, run(), read_*, save) takes
// such a position from the base, so attention over it computes exactly what it would over rows of
// its own (the same bytes, the same kernels and order: kernels/attention.h's split rule). A
// base's valid rows are immutable: a cache writes into its base only past base->n_past() (it
// builds the base, appending in step with it), and throws Error otherwise. Only a cache without
// ring layers shares.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/layout/blocks.h"
#include "kernels/repack.h"
#include "tokenizer/tokenizer.h"

namespace specula {

class ThreadPool;

enum class KVType { F32, F16, Q8_0 };

const char* kv_type_name(KVType t);  // "f32", "f16", "q8_0"
// llama.cpp's names (f32, f16, q8_0); Error naming `flag` and listing them otherwise.
KVType parse_kv_type(std::string_view name, std::string_view flag);
// Bytes of one row of n values (a Q8_0 row: n / 32 whole blocks).
inline size_t kv_row_bytes(KVType t, int n) {
    return t == KVType::F32   ? sizeof(float) * size_t(n)
           : t == KVType::F16 ? sizeof(fp16_t) * size_t(n)
                              : sizeof(block_q8_0) * size_t(n / QK8_0);
}

// Bytes that grow uninitialised (resize() writes nothing): a snapshot's, every one of which
// KVCache::save writes right after.
template <class T>
struct UninitAllocator : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = UninitAllocator<U>;
    };
    UninitAllocator() = default;
    template <class U>
    UninitAllocator(const UninitAllocator<U>&) noexcept {}
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... A>
    void construct(U* p, A&&... a) {
        ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
};
using SnapshotBytes = std::vector<uint8_t, UninitAllocator<uint8_t>>;

// Positions [0, tokens.size()) of a cache, copied out: every layer's K rows, then its V rows, as
// the cache stores them (its types), each row whole (n_embd_kv values, whatever the layout; no V
// rows for a layer whose V is its K). The server's host-RAM prompt cache keeps these.
struct KVSnapshot {
    std::vector<token_id> tokens;
    SnapshotBytes k, v;
    size_t bytes() const { return k.size() + v.size() + tokens.size() * sizeof(token_id); }
};

// One layer's K/V shape: the values of one position (n_embd_kv, for K and for V alike) and of
// one KV head (head_dim; 0: the whole row is one head). Layers may differ (Gemma 4's
// full-attention layers have wider heads than its sliding-window ones).
// v_is_k: the layer's V rows are its K rows (deepseek2's MLA: the values are the latent part of
// the one cache row). The layer then keeps K's rows only, once: write() stores no V, and every V
// reader (the pointers, run(), read_v*, save / restore, a shared prefix) reads K's rows, of K's
// type (type_v(layer); the cache's V type, -ctv, does not apply to it).
struct KVLayerShape {
    int n_embd_kv = 0;
    int head_dim = 0;
    bool v_is_k = false;
};

class KVCache {
  public:
    // `windows`: each layer's sliding window (0: the whole context; -1: no cache at all, a hybrid
    // model's recurrent layer; empty: every layer whole).
    // `head_dim`: the values of one KV head (head-major layout, above; 0: whole rows).
    // `small_pages`: 4 KiB pages, so the memory committed follows the positions written (without
    // it, 2 MiB pages past the first 2 MiB of each head's rows: the kernel policy's hugepages).
    KVCache(int n_layer, int n_ctx, int n_embd_kv, KVType type_k = KVType::F32,
            KVType type_v = KVType::F32, std::span<const int> windows = {}, int max_pass = 0,
            int head_dim = 0, bool small_pages = false);
    // Layers of their own shapes (shapes.size() layers).
    KVCache(std::span<const KVLayerShape> shapes, int n_ctx, KVType type_k, KVType type_v,
            std::span<const int> windows, int max_pass, bool small_pages = false);

    // Bytes the cache takes (K and V, every layer and position; a v_is_k layer's rows once).
    static double bytes(int n_layer, int n_ctx, int n_embd_kv, KVType type_k, KVType type_v);
    // The same for sliding-window layers: each layer's rows (window_rows for a windowed one).
    static double bytes(int n_layer, int n_ctx, int n_embd_kv, KVType type_k, KVType type_v,
                        std::span<const int> windows, int max_pass);
    // The same for layers of their own shapes.
    static double bytes(std::span<const KVLayerShape> shapes, int n_ctx, KVType type_k,
                        KVType type_v, std::span<const int> windows, int max_pass);
    // Rows a layer of window w (0: no window, n_ctx; -1: a layer without cache, 0) keeps.
    static int window_rows(int window, int max_pass, int n_ctx);

    // Stores the K row (after RoPE) and the V row of `pos` in `layer` (n_embd_kv(layer) floats),
    // rounded to the cache's types (a v_is_k layer: K only; v is not read).
    void write(int layer, int pos, const float* k, const float* v);

    // In place, value `off` of position `pos` (off within one head; a Q8_0 side: off a multiple
    // of 32, the block it starts): the values of the same head at the next positions are stride()
    // values (F32 / F16) or k_stride_bytes() / v_stride_bytes() bytes (any type) apart. k_bytes:
    // a Q8_0 key side only (the others are transposed: k_t). The V pointers of a v_is_k layer point
    // into K's rows, so they exist only where K is not transposed (v_in_place).
    const float* v(int layer, int pos, int off) const {
        return reinterpret_cast<const float*>(v_bytes(layer, pos, off));
    }
    const uint16_t* v_f16(int layer, int pos, int off) const {
        return reinterpret_cast<const uint16_t*>(v_bytes(layer, pos, off));
    }
    const uint8_t* k_bytes(int layer, int pos, int off) const {
        const KVCache& c = source(pos);
        return c.k_ + c.offset(layer, pos, off, true);
    }
    const uint8_t* v_bytes(int layer, int pos, int off) const {
        const KVCache& c = source(pos);
        return (v_is_k(layer) ? c.k_ : c.v_) + c.offset(layer, pos, off, false);
    }
    // Whether the layer's V rows are its K rows (KVLayerShape::v_is_k), and whether its V side can
    // be read in place through the pointers (otherwise through read_v / read_v_rows only).
    bool v_is_k(int layer) const { return L(layer).v_is_k; }
    bool v_in_place(int layer) const { return !v_is_k(layer) || !k_transposed(); }
    // A transposed (F32 / F16) key side: value `off` of row 0 of the layer (of this cache's own
    // rows: source(pos).k_t for a position of a shared prefix), row j's at
    // [(j / kKeyBlock) * k_block_stride() + kKeyBlock * d + j % kKeyBlock] from it for value
    // off + d of the same head (j: a row, p % rows(layer) for position p).
    bool k_transposed() const { return type_k_ != KVType::Q8_0; }
    // Value `off` of row 0 of the layer's V side in this cache's own memory (no shared prefix's
    // base): a head's rows step by stride() / v_stride_bytes() from it.
    const uint8_t* v_own(int layer, int off) const {
        return (v_is_k(layer) ? k_ : v_) + offset(layer, 0, off, false);
    }
    const float* k_t(int layer, int off) const {
        return reinterpret_cast<const float*>(k_ + k_offset(layer, 0, off));
    }
    const uint16_t* k_t_f16(int layer, int off) const {
        return reinterpret_cast<const uint16_t*>(k_ + k_offset(layer, 0, off));
    }
    size_t k_block_stride(int layer) const { return size_t(kKeyBlock) * size_t(L(layer).slice); }
    // Values (F32 / F16 sides) from one position of a head to the next: the values of one head,
    // head_dim, or n_embd_kv for whole rows.
    int stride(int layer) const { return L(layer).slice; }
    size_t k_stride_bytes(int layer) const { return L(layer).k_slice; }
    size_t v_stride_bytes(int layer) const { return L(layer).v_slice; }
    // Of positions [pos, pos + n), how many lie in consecutive rows from pos's of one cache (all
    // of them but where a ring layer wraps or a shared prefix ends): the pointers above stay valid
    // over that many.
    int run(int layer, int pos, int n) const {
        if (pos < limit_) n = std::min(n, limit_ - pos);
        const int r = L(layer).rows;
        return r == n_ctx_ ? n : std::min(n, r - pos % r);
    }
    // Values [off, off + n) of a row as floats, whatever the type and the layout.
    void read_k(int layer, int pos, int off, int n, float* out) const {
        read(true, layer, pos, off, n, out);
    }
    void read_v(int layer, int pos, int off, int n, float* out) const {
        read(false, layer, pos, off, n, out);
    }
    // Rows [j0, j1) of the same, one after the other (out: (j1 - j0) x n floats), the same values
    // as read_k / read_v row by row; a Q8_0 cache in one tight loop (no call per block) where
    // [off, off + n) lies in one head.
    void read_k_rows(int layer, int j0, int j1, int off, int n, float* out) const {
        read_rows(true, layer, j0, j1, off, n, out);
    }
    void read_v_rows(int layer, int j0, int j1, int off, int n, float* out) const {
        read_rows(false, layer, j0, j1, off, n, out);
    }

    KVType type_k() const { return type_k_; }
    KVType type_v() const { return type_v_; }
    // The type of a layer's V rows: type_v(), or type_k() for a v_is_k layer.
    KVType type_v(int layer) const { return v_is_k(layer) ? type_k_ : type_v_; }
    int n_layer() const { return n_layer_; }
    int n_ctx() const { return n_ctx_; }
    int n_embd_kv(int layer) const { return L(layer).width; }
    int rows(int layer) const { return L(layer).rows; }  // n_ctx, or a ring's rows
    int max_pass() const { return max_pass_; }           // 0: no sliding-window layer
    bool has_ring() const { return max_pass_ > 0; }
    int n_past() const { return int(tokens_.size()); }
    // The token at each valid position [0, n_past).
    std::span<const token_id> tokens() const { return tokens_; }
    // A pass wrote the rows of `t` at positions n_past() ..: they become valid (in the base too,
    // for those below shared(): Error unless the base holds exactly n_past() positions).
    void append(std::span<const token_id> t) {
        if (n_past() < limit_) append_base(t);
        tokens_.insert(tokens_.end(), t.begin(), t.end());
        touched_ = std::max(touched_, n_past());
    }
    // Positions [0, touched()) have been written since the cache was made or last released: the
    // rows whose memory is committed (rows past n_past() that a rollback dropped included).
    int touched() const { return touched_; }
    // Gives the memory of the rows at positions >= n_past() back to the system (whole pages;
    // ring layers keep theirs): what a rollback or a reset left written but unused. touched()
    // becomes n_past().
    void release_unused();
    // Whether the ring layers still hold every row a pass at position n reads (always for a
    // cache without them, and for n = 0).
    bool can_keep(int n) const;
    // Layers [0, n) keep their K/V on a device (model/load/offload.h) with every position, so their
    // rings here are never written and never limit can_keep.
    void set_device_layers(int n) { n_device_ = n; }
    // Rollback: positions >= n stop being valid (n <= n_past(); can_keep(n)). A shared prefix
    // longer than n shrinks to n when n < n_past() (the base is left as it is; truncating to
    // n_past() changes nothing, so a cache that builds its base keeps building it).
    void truncate(int n) {
        if (n < limit_ && n < n_past()) limit_ = n;
        tokens_.resize(size_t(n));
        if (limit_ == 0) base_.reset();
    }
    // Holds no position and shares nothing any more.
    void unshare() {
        tokens_.clear();
        limit_ = 0;
        base_.reset();
    }

    // Makes positions [0, limit) those of `base` (see the header). The cache must hold no
    // position (n_past() == 0: reset it first); its own memory is given back. It then holds
    // base's positions [0, min(limit, base->n_past())); where limit is more, it builds the base:
    // its next rows below limit are written into the base, which must have no other writer.
    // Error for a base of another shape, types or n_ctx, or a cache with ring layers.
    void share_prefix(std::shared_ptr<KVCache> base, int limit);
    // Positions [0, shared()) are the base's (0: none).
    int shared() const { return limit_; }
    const std::shared_ptr<KVCache>& base() const { return base_; }
    // The cache that holds position pos: the base below shared(), else this one.
    const KVCache& source(int pos) const { return pos < limit_ ? *base_ : *this; }
    // Positions [0, touched()) less the shared ones: the rows written into this cache's own memory.
    int own_touched() const { return std::max(0, touched_ - limit_); }
    // Length of the longest prefix `t` shares with the cached tokens that the cache can keep
    // (can_keep; else 0).
    int common_prefix(std::span<const token_id> t) const;

    // Copies out positions [0, n) (n <= n_past()). Only a cache without ring layers (Error).
    // `pool`: its threads copy a share of the layers each (the same bytes).
    KVSnapshot save(int n, ThreadPool* pool = nullptr) const;
    // Makes the cache hold exactly what `s` holds (rows and tokens). `s` must come from a cache of
    // this shape and types (Error otherwise) and fit n_ctx.
    void restore(const KVSnapshot& s);

  private:
    // One layer's geometry and where its rows start in k_ / v_.
    struct Layer {
        int width = 0;                    // values per position
        int slice = 0, n_slices = 1;      // values per head slice; slices per position
        size_t k_slice = 0, v_slice = 0;  // bytes per slice (v_is_k: K's)
        int window = 0, rows = 0;         // its window (0, or -1: no cache) and rows kept
        size_t k_base = 0, v_base = 0;    // its first byte in k_ / v_
        size_t ring_first = 0;            // its ring's first entry in ring_pos_
        bool v_is_k = false;              // KVLayerShape::v_is_k: no V rows of its own
        size_t k_row() const { return k_slice * size_t(n_slices); }  // bytes of a whole row
        // Bytes of a whole V row in v_ (0: V reads K's rows).
        size_t v_row() const { return v_is_k ? 0 : v_slice * size_t(n_slices); }
    };
    const Layer& L(int layer) const { return layers_[size_t(layer)]; }
    size_t snapshot_bytes(int n, bool is_k) const;  // every layer's n whole rows
    void advise_huge_pages();  // 2 MiB pages past the first 2 MiB of each head's run of rows
    void append_base(std::span<const token_id> t);  // append()'s part below shared()
    void read(bool is_k, int layer, int pos, int off, int n, float* out) const;
    void read_rows(bool is_k, int layer, int j0, int j1, int off, int n, float* out) const;
    // read_rows of a transposed key side's own rows, [off, off + n) in one head.
    void read_t_rows(int layer, int j0, int j1, int off, int n, float* out) const;
    // Rows allocated for r rows: whole key blocks.
    static size_t whole_blocks(size_t r) { return (r + kKeyBlock - 1) / kKeyBlock * kKeyBlock; }
    // Rows of a layer's allocation.
    size_t span(int layer) const { return whole_blocks(size_t(L(layer).rows)); }
    int row(int layer, int pos) const {
        const int r = L(layer).rows;
        return pos < r ? pos : pos % r;
    }
    // Byte offset of value `off` of position `pos` in row-major slices: the layer's first byte,
    // then the head's run of span() slices, the position's slice, the value (of K's rows for a
    // v_is_k layer's V).
    size_t offset(int layer, int pos, int off, bool is_k) const {
        const Layer& l = L(layer);
        is_k = is_k || l.v_is_k;  // a v_is_k layer's V rows are K's
        const int head = off / l.slice, in = off % l.slice;
        const size_t slice = is_k ? l.k_slice : l.v_slice;
        return (is_k ? l.k_base : l.v_base) +
               (size_t(head) * span(layer) + size_t(row(layer, pos))) * slice +
               kv_row_bytes(is_k ? type_k_ : type_v_, in);
    }
    // The same in a transposed key side: the head's run of blocks, the row's block, the value's
    // line of kKeyBlock, the row's lane.
    size_t k_offset(int layer, int pos, int off) const {
        const Layer& l = L(layer);
        const size_t head = size_t(off / l.slice), in = size_t(off % l.slice);
        const size_t r = size_t(row(layer, pos)), es = kv_row_bytes(type_k_, 1);
        return l.k_base +
               es * (head * span(layer) * size_t(l.slice) + r / kKeyBlock * k_block_stride(layer) +
                     in * kKeyBlock + r % kKeyBlock);
    }
    int n_layer_, n_ctx_;
    int max_pass_ = 0;
    int n_device_ = 0;  // set_device_layers
    std::vector<Layer> layers_;
    // Ring layers: the position each row holds (-1: none yet), from Layer::ring_first on.
    std::vector<int> ring_pos_;
    KVType type_k_, type_v_;
    std::vector<token_id> tokens_;   // reserved n_ctx at construction
    int touched_ = 0;                // touched()
    std::shared_ptr<KVCache> base_;  // share_prefix
    int limit_ = 0;                  // shared()
    std::unique_ptr<PackedBuffer> k_buf_, v_buf_;
    uint8_t* k_ = nullptr;
    uint8_t* v_ = nullptr;
};

}  // namespace specula
