// Q8_0 weights with rows interleaved in tiles, repacked once at load for the tiled matmul kernels
// (kernels/<isa>/gemm_q8.cpp). The GGUF row layout makes a kernel reduce every (row, token) dot
// product across SIMD lanes; the tiled layout puts kPackRows = 16 rows side by side, so one
// 64-byte load holds 4 consecutive weights of each of the 16 rows and the SIMD lanes run across
// outputs: each output accumulates its blocks one after the other, acc = fma(float(isum_b),
// d_w * d_a, acc), in block order. That sequence is the same whatever the number of tokens, the
// token grouping, the thread split or the ISA level, so the scalar, AVX2 and AVX-512 kernels give
// bit-identical results and every batch size gives the same bits (batch invariance).
//
// Layout of a packed matrix: ceil(rows / 16) tiles of tile_bytes(cols) each, tile i holding rows
// 16 i .. 16 i + 15 (rows past the end are zero weights with zero scales). A tile is a sequence of
// block pairs (blocks 2j and 2j + 1 of 32 columns), 1088 bytes each, 64-byte aligned:
//   [0, 64)        fp16 scales: block 2j's 16 rows, then block 2j + 1's 16 rows
//   [64, 576)      block 2j's quants: 8 lines of 64 bytes; line g holds columns 4g .. 4g + 3 of
//                  row r at bytes 4r .. 4r + 3
//   [576, 1088)    block 2j + 1's quants, the same way
// A row with an odd number of blocks leaves the last pair's second half unused (zero). Quants are
// stored as unsigned bytes q + 128 (q ^ 0x80), the operand vpdpbusd multiplies unsigned; the
// kernels subtract 128 * sum(a) per block (PackedActs::corr) or undo the offset first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernel_types.h"
#include "kernels/matmul.h"

namespace specula {

constexpr int kPackRows = 16;            // rows per tile
constexpr size_t kPackPairBytes = 1088;  // one block pair of a tile
constexpr size_t kPackAlign = 64;

// Weight types repack() handles: Q8_0 here, Q4_K and Q6_K in the layout of
// kernels/layout/repack_k.h, F16 and BF16 in the panels of kernels/layout/repack_float.h.
bool repackable(GGMLType t);

// Bytes of one tile (16 rows) of a Q8_0 matrix, of any repackable type's, and of the whole packed
// matrix.
size_t packed_tile_bytes(int64_t cols);
size_t packed_tile_bytes(GGMLType t, int64_t cols);
size_t packed_size(const WeightView& W);

// Matrix i of a stack of n matrices of equal height along W's rows (a stacked expert tensor, MLA's
// per-head matrices): its rows of W.data, and of W.packed where the stack is packed (each matrix
// is then whole tiles: model/load/pack.cpp packs a stack only then).
WeightView stack_slice(const WeightView& W, int i, int n);

// Writes W (row layout, W.data) in the tiled layout to dst (packed_size(W) bytes, 64-byte
// aligned). W must be repackable with cols a multiple of its block size.
void repack(const WeightView& W, uint8_t* dst);

// Row r of a packed matrix (W.packed) as floats: the same values dequantize_row gives for the row
// layout (get_rows on a tied embedding, tests).
void dequantize_packed_row(const WeightView& W, int64_t r, float* out);

// A 64-byte aligned, zero-filled anonymous memory block holding packed weights, starting on a 2 MiB
// boundary and marked MADV_HUGEPAGE (unless the kernel policy's hugepages is off) so that, where
// transparent huge pages are on (always or madvise), a decode pass streaming every weight walks 2
// MiB pages rather than 4 KiB ones (measured on Zen 5, 8 paired runs per type: tg +4% median for
// Q8_0, Q4_K_M and F16, 9-token passes +2-9%). Only whole huge pages inside the block get one: no
// memory is added.
class PackedBuffer {
  public:
    // Pages::small: 4 KiB pages whatever the policy (MADV_NOHUGEPAGE, which holds where
    // transparent huge pages are "always" too), so the memory committed follows the bytes
    // written (a KV cache, model/state/kv_cache.h); advise_huge() asks for huge pages over parts.
    enum class Pages { policy, small };
    explicit PackedBuffer(size_t bytes, Pages pages = Pages::policy);
    ~PackedBuffer();
    PackedBuffer(PackedBuffer&& o) noexcept
        : p_(o.p_), n_(o.n_), map_(o.map_), map_bytes_(o.map_bytes_) {
        o.p_ = nullptr, o.n_ = 0, o.map_ = nullptr, o.map_bytes_ = 0;
    }
    PackedBuffer& operator=(PackedBuffer&&) = delete;
    PackedBuffer(const PackedBuffer&) = delete;
    uint8_t* data() const { return p_; }
    size_t size() const { return n_; }
    // Gives the pages lying wholly inside bytes [from, to) back to the system (they read as
    // zeros afterwards and cost no memory until written again).
    void release(size_t from, size_t to);
    // Asks for 2 MiB pages over the huge pages lying wholly inside bytes [from, to) of a
    // Pages::small buffer (where transparent huge pages are on): a part that is written whole.
    void advise_huge(size_t from, size_t to);
    static constexpr size_t kHugePage = size_t{2} << 20;

  private:
    uint8_t* p_ = nullptr;
    size_t n_ = 0;
    void* map_ = nullptr;  // the mapping: p_ rounded up to a huge page inside it
    size_t map_bytes_ = 0;
};

// Gives back to the kernel the pages lying wholly inside [p, p + n) of a read-only file mapping
// (the original of a tensor that was repacked), so resident memory does not count it twice. The
// bytes stay readable: touching them again reads them back from the file (or, in anonymous
// memory such as a PackedBuffer's, as zeros).
void release_mapped_pages(const void* p, size_t n);

// What a packed kernel of weight type wt reads for ntok rows of its activations (quantize_acts:
// row t at acts + t * stride): Q8_0's per-block sums in d and corr, the Q8_K rows rearranged
// (kq_prepare_acts) into q, d and corr, or F16 / BF16 rows widened to floats in q
// (float_prepare_acts); for Q8_0 passes of 2 to kBlockRecordTokens tokens, q also holds the block
// records (packed_act_records). The vectors grow as needed; the result points into them and acts.
PackedActs packed_acts(GGMLType wt, const uint8_t* acts, size_t stride, int64_t cols, int ntok,
                       std::vector<float>& d, std::vector<int32_t>& corr, std::vector<uint8_t>& q);

// Fills d and corr (ntok * nb entries each) from ntok Q8_0 rows.
void packed_act_sums(const uint8_t* acts, size_t stride, int64_t nb, int ntok, float* d,
                     int32_t* corr);

// Writes a's values for its first ntok tokens (ntok <= kBlockRecordTokens) as the block records
// PackedActs::records describes, into out (block_record_bytes(ntok) * a.nb bytes).
void packed_act_records(const PackedActs& a, int ntok, uint8_t* out);

// The scalar reference tile kernel (the same float operations as the SIMD kernels).
void packed_tile_ref(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
                     int64_t ldy);

}  // namespace specula
