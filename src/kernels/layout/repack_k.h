// Q4_K and Q6_K weights with rows interleaved in tiles, repacked once at load for the tiled
// K-quant kernels (kernels/gemm_kquants_*.cpp), the K-quant counterpart of the Q8_0 layout in
// kernels/repack.h (same PackedTileFn, PackedBuffer and page release; kPackRows = 16 rows a tile).
//
// A 64-byte line holds 4 consecutive weights of each of the 16 rows (row r at bytes 4r .. 4r + 3),
// so one vpdpbusd with a token's 4 activation bytes broadcast gives the 16 rows' partial dot
// products in its 16 lanes: the lanes run across outputs and no kernel ever reduces across lanes.
// Per (row, super-block, token) every kernel computes the same exact int32 sums, then the same
// float steps, in super-block order:
//   Q4_K: isum = sum_s sc_s * (q_s . y_s), imin = sum_s m_s * (bsum_2s + bsum_2s+1) (s: the 8
//         32-element sub-blocks, q in 0..15), then
//         acc = fma(float(imin), -(dmin_w * d_a), acc); acc = fma(float(isum), d_w * d_a, acc)
//   Q6_K: isum = sum_g sc_g * (u_g . y_g - 32 * bsum_g) (g: the 16 16-element groups, u = q + 32
//         in 0..63), then acc = fma(float(isum), d_w * d_a, acc)
// The integers are exact, so their grouping (SIMD width, token count, ISA level) changes no bit:
// the scalar, AVX2 and AVX-512 kernels agree bit for bit at every batch size (batch invariance),
// as the Q8_0 tiles do. (The row-layout kernels of kernels/x86/dot_kquants.h and
// kernels/avx512/dot_kquants512.h keep their own, equally batch-invariant, float order: a weight
// is either packed or not for the whole process.)
//
// Layout of a packed matrix: ceil(rows / 16) tiles, each the row's super-blocks in order, one
// 64-byte aligned record per super-block (rows past the end are zero weights with zero scales):
//   Q4_K, 2368 bytes:  [0, 32) d (16 fp16)   [32, 64) dmin (16 fp16)
//                      [64, 192) sub-block scales, byte 16 s + r   [192, 320) mins, the same way
//                      [320, 2368) 32 quant lines: line g, byte 4r + j holds element 8g + j of row
//                      r in its low nibble and element 8g + 4 + j in its high nibble
//   Q6_K, 3392 bytes:  [0, 32) d (16 fp16)   [32, 64) zero
//                      [64, 320) group scales (int8), byte 16 g + r
//                      [320, 2368) 32 lines of low nibbles of u, as Q4_K's quant lines
//                      [2368, 3392) 16 lines of high bits: line g (group g, elements 16g ..
//                      16g + 15), byte 4r + j, bits 2k .. 2k + 1 = the top 2 bits of u for
//                      element 16g + 4k + j
// Activations (kq_prepare_acts) are the Q8_K rows rearranged by super-block: for super-block b,
// the ntok tokens' 256 quants one after the other (a kernel reaches every token of its group from
// one pointer), the scales d[b][t] and kKqCorr int32 per (b, t): Q6_K's -32 * bsum_g (16), then
// Q4_K's sub-block sums c_s = bsum_2s + bsum_2s+1 as int16 pairs (c_2j, c_2j+1) (4; |c_s| <=
// 32 * 127 fits int16), which one vpdpwssd / vpmaddwd meets with the mins (m_2j, m_2j+1), then
// Q6_K's -32 * the sum of each 8 quants (32): a dot over 8 elements that starts there is
// sum (u - 32) * x, |.| <= 8 * 32 * 127 = 32512, an int16 (Q8_K's quants lie in [-127, 127]:
// its quantiser never gives -128).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/repack.h"

namespace specula {

constexpr size_t kQ4KSuperBytes = 2368;  // one super-block of a Q4_K tile
constexpr size_t kQ6KSuperBytes = 3392;  // one super-block of a Q6_K tile

// Q4_K or Q6_K (the types this layout covers).
bool kq_repackable(GGMLType t);

// Bytes of one tile (16 rows) of a `cols`-column matrix of type t.
size_t kq_tile_bytes(GGMLType t, int64_t cols);

// Writes W (row layout) in the tiled layout to dst (packed_size(W) bytes, 64-byte aligned).
void kq_repack(const WeightView& W, uint8_t* dst);

// Row r of a packed K-quant matrix as floats: the values dequantize_row gives for the row layout.
void kq_dequantize_packed_row(const WeightView& W, int64_t r, float* out);

constexpr int kKqCorr = 52;      // int32 per (super-block, token) in PackedActs::corr
constexpr int kKqMinPairs = 16;  // where the Q4_K sub-block sum pairs start in them
constexpr int kKqQ6Halves = 20;  // where Q6_K's -32 * (sum of 8 quants) start

// The rearranged activations: bytes of quants, floats of scales and int32 of corr for ntok tokens
// of a `cols`-column row.
size_t kq_act_bytes(int64_t cols, int ntok);
size_t kq_act_floats(int64_t cols, int ntok);
size_t kq_act_corrs(int64_t cols, int ntok);

// Rearranges ntok Q8_K rows (acts, stride bytes apart) into q, d and corr (sizes above) and
// returns the PackedActs the kernels read: q = the quants, stride = bytes per super-block (256
// ntok), d, corr, nb = super-blocks per row.
PackedActs kq_prepare_acts(const uint8_t* acts, size_t stride, int64_t cols, int ntok, uint8_t* q,
                           float* d, int32_t* corr);

// The same activations from token t0 on (a group of tokens).
inline PackedActs kq_acts_from(const PackedActs& a, int t0) {
    PackedActs at = a;
    at.q += static_cast<size_t>(t0) * 256;
    at.d += t0;
    at.corr += static_cast<size_t>(t0) * kKqCorr;
    return at;
}

// The scalar reference tile kernels (the float operations of the SIMD ones).
void kq_tile_ref_q4_K(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
                      int64_t ldy);
void kq_tile_ref_q6_K(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
                      int64_t ldy);

}  // namespace specula
