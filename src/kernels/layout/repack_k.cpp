// The tiled Q4_K / Q6_K layout (see repack_k.h): repacking, reading a row back, the Q6_K
// activation offsets and the scalar reference tile kernels.
#include "kernels/layout/repack_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/error.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/ref/quants_internal.h"

namespace specula {

namespace {

constexpr int kLines = 32;  // quant lines of 8 elements per row in a super-block

size_t super_bytes(GGMLType t) {
    return t == GGMLType::Q4_K ? kQ4KSuperBytes : kQ6KSuperBytes;
}

fp16_t load_fp16(const uint8_t* p) {
    fp16_t h;
    std::memcpy(&h, p, 2);
    return h;
}

// Element e (0..255) of row r in a super-block record: its byte in the quant lines, the nibble
// and, for Q6_K, its high-bit byte and shift.
size_t nibble_byte(int r, int e) {
    return 320 + 64 * (e / 8) + 4 * r + e % 4;
}
int nibble_shift(int e) {
    return (e % 8) < 4 ? 0 : 4;
}
size_t high_byte(int r, int e) {
    return 2368 + 64 * (e / 16) + 4 * r + e % 4;
}
int high_shift(int e) {
    return 2 * ((e % 16) / 4);
}

uint32_t load_u32(const uint8_t* p) {
    uint32_t x;
    std::memcpy(&x, p, 4);
    return x;
}
void store_u32(uint8_t* p, uint32_t x) {
    std::memcpy(p, &x, 4);
}

// One quant line of row r (nibble_byte / nibble_shift): elements 8j..8j+3 in the low nibbles of
// its 4 bytes, 8j+4..8j+7 in the high ones, from 8 consecutive elements that a block keeps in the
// low (high == false) or high nibbles of 8 consecutive bytes at src. Four bytes at a time (one
// element at a time, repacking was most of the time an 8B Q4_K_M file took to load).
uint32_t nibble_line(const uint8_t* src, bool high) {
    const uint32_t a = load_u32(src), b = load_u32(src + 4);
    return high ? ((a >> 4) & 0x0F0F0F0Fu) | (b & 0xF0F0F0F0u)
                : (a & 0x0F0F0F0Fu) | ((b & 0x0F0F0F0Fu) << 4);
}

// Q4_K: row r's d, dmin, scales and mins (the record's first 320 bytes).
void pack_q4_K_scales(const block_q4_K& b, int r, uint8_t* sb) {
    std::memcpy(sb + 2 * r, &b.d, 2);
    std::memcpy(sb + 32 + 2 * r, &b.dmin, 2);
    for (int s = 0; s < 8; ++s) {
        int sc, m;
        ref::get_scale_min_k4(s, b.scales, &sc, &m);
        sb[64 + 16 * s + r] = static_cast<uint8_t>(sc);
        sb[192 + 16 * s + r] = static_cast<uint8_t>(m);
    }
}

// Q4_K: group g of 64 elements is bytes qs[32g, 32g + 32): elements 64g + i in their low nibbles,
// 64g + 32 + i in their high ones.
void pack_q4_K(const block_q4_K& b, int r, uint8_t* sb) {
    pack_q4_K_scales(b, r, sb);
    for (int j = 0; j < kLines; ++j) {
        const int e = 8 * j % 64;
        store_u32(sb + nibble_byte(r, 8 * j), nibble_line(b.qs + 32 * (j / 8) + e % 32, e >= 32));
    }
}

#if defined(__SSE2__)
// 4 rows' vectors whose dwords 0 and 2 hold 4 bytes of two lines (or high-bit groups) each: the
// 4-row stretches (row r0's first) of the first to p and of the second to p + dist.
void store_rows4(const __m128i* v, uint8_t* p, size_t dist) {
    const __m128i lo01 = _mm_unpacklo_epi32(v[0], v[1]), lo23 = _mm_unpacklo_epi32(v[2], v[3]);
    const __m128i hi01 = _mm_unpackhi_epi32(v[0], v[1]), hi23 = _mm_unpackhi_epi32(v[2], v[3]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_unpacklo_epi64(lo01, lo23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + dist), _mm_unpacklo_epi64(hi01, hi23));
}

// 16 rows' 16 bytes (v[r]) stored as 16-byte columns from p: column c (byte c of every row) at p
// + 16 c. Four rounds of interleaving the bytes of vectors 8 apart (a perfect shuffle of the 256
// bytes each) transpose them.
void store_columns16(__m128i (&v)[kPackRows], uint8_t* p) {
    for (int round = 0; round < 4; ++round) {
        __m128i t[kPackRows];
        for (int i = 0; i < 8; ++i) {
            t[2 * i] = _mm_unpacklo_epi8(v[i], v[i + 8]);
            t[2 * i + 1] = _mm_unpackhi_epi8(v[i], v[i + 8]);
        }
        std::copy(t, t + kPackRows, v);
    }
    for (int c = 0; c < 16; ++c) _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 16 * c), v[c]);
}

// Q4_K: the d, dmin, scales and mins of a whole tile's 16 rows (pack_q4_K_scales for each). A
// row's 12 bytes of 6-bit scales and mins, as words A, B, C: scales 0-3 = A & 63, mins 0-3 = B &
// 63, scales 4-7 = the low nibbles of C with A's top 2 bits above, mins 4-7 the high nibbles of C
// with B's (get_scale_min_k4's), 4 bytes at a time, then stored as the record's columns: scale s
// at 64 + 16 s, min s at 192 + 16 s. (Byte by byte, 8 branchy decodes and 16 single-byte stores
// per row and record took a tenth of an 8B Q4_K_M file's load; this way, with Q6_K's scales as
// pack_q6_K_scales_tile's, its load went from 1.45-1.90 to 1.15-1.53 s, five alternating runs on
// an Intel Xeon, 2 threads.)
void pack_q4_K_scales_tile(const uint8_t* const* rows, int64_t b, uint8_t* sb) {
    __m128i v[kPackRows];  // row r: scales 0-7, mins 0-7
    for (int r = 0; r < kPackRows; ++r) {
        const block_q4_K& blk = reinterpret_cast<const block_q4_K*>(rows[r])[b];
        std::memcpy(sb + 2 * r, &blk.d, 2);
        std::memcpy(sb + 32 + 2 * r, &blk.dmin, 2);
        const uint32_t a = load_u32(blk.scales), bw = load_u32(blk.scales + 4),
                       c = load_u32(blk.scales + 8);
        const uint32_t sc03 = a & 0x3F3F3F3Fu, m03 = bw & 0x3F3F3F3Fu;
        const uint32_t sc47 = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
        const uint32_t m47 = ((c >> 4) & 0x0F0F0F0Fu) | ((bw >> 2) & 0x30303030u);
        v[r] = _mm_set_epi32(int(m47), int(m03), int(sc47), int(sc03));
    }
    store_columns16(v, sb + 64);
}

// Q6_K: the d, zeros and group scales of a whole tile's 16 rows (pack_q6_K_scales for each): a
// row's 16 scales, stored as the record's columns.
void pack_q6_K_scales_tile(const uint8_t* const* rows, int64_t b, uint8_t* sb) {
    __m128i v[kPackRows];
    for (int r = 0; r < kPackRows; ++r) {
        const block_q6_K& blk = reinterpret_cast<const block_q6_K*>(rows[r])[b];
        std::memcpy(sb + 2 * r, &blk.d, 2);
        v[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
    }
    std::memset(sb + 32, 0, 32);  // the layout's zeros (no dmin)
    store_columns16(v, sb + 64);
}

// Lines (2v, 2v + 1) of a 16-byte vector of nibbles n (0..15 each): byte k of a line is
// n[k] | n[k + 4] << 4 (nibble_line's), in dwords 0 and 2.
__m128i nibble_lines(__m128i n) {
    return _mm_or_si128(n, _mm_slli_epi16(_mm_srli_epi64(n, 32), 4));
}
#endif

// The same record for all 16 rows at once (a whole tile), 4 rows at a time with SSE2 (x86-64's
// baseline): a row's 16 quant bytes give two lines of low and two of high nibbles in dwords 0 and
// 2 of a vector, and 4 rows' vectors transpose into the 4-row stretches of those lines (the
// row-at-a-time packing, 4-byte stores 64 bytes apart, was most of an 8B Q4_K_M file's load).
void pack_q4_K_tile(const uint8_t* const* rows, int64_t b, uint8_t* sb) {
#if defined(__SSE2__)
    pack_q4_K_scales_tile(rows, b, sb);
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (int r0 = 0; r0 < kPackRows; r0 += 4) {
        for (int G = 0; G < 4; ++G) {
            __m128i v[4][4];  // [A low, A high, B low, B high][row]
            for (int i = 0; i < 4; ++i) {
                const uint8_t* qs =
                    reinterpret_cast<const block_q4_K*>(rows[r0 + i])[b].qs + 32 * G;
                const __m128i A = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
                const __m128i B = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16));
                v[0][i] = nibble_lines(_mm_and_si128(A, low4));
                v[1][i] = nibble_lines(_mm_and_si128(_mm_srli_epi16(A, 4), low4));
                v[2][i] = nibble_lines(_mm_and_si128(B, low4));
                v[3][i] = nibble_lines(_mm_and_si128(_mm_srli_epi16(B, 4), low4));
            }
            static constexpr int kFirstLine[4] = {0, 4, 2, 6};  // of each, within the group
            for (int k = 0; k < 4; ++k)
                store_rows4(v[k], sb + nibble_byte(r0, 64 * G + 8 * kFirstLine[k]), 64);
        }
    }
#else
    for (int r = 0; r < kPackRows; ++r)
        pack_q4_K(reinterpret_cast<const block_q4_K*>(rows[r])[b], r, sb);
#endif
}

// Q6_K: row r's d, the layout's zeros in place of dmin and its group scales.
void pack_q6_K_scales(const block_q6_K& b, int r, uint8_t* sb) {
    std::memcpy(sb + 2 * r, &b.d, 2);
    std::memset(sb + 32 + 2 * r, 0, 2);  // the layout's zeros (no dmin)
    for (int g = 0; g < 16; ++g) sb[64 + 16 * g + r] = static_cast<uint8_t>(b.scales[g]);
}

// Q6_K: element 128h + 32k + i (u = q + 32) has its low 4 bits in the low (k < 2) or high nibble
// of ql[64h + 32(k % 2) + i] and its top 2 bits at bits 2k of qh[32h + i]. In the tile, group c
// of 16 elements keeps the top bits in row r's 4 bytes at high_byte(r, 16c): element 16c + 4q + k
// in bits 2q..2q+1 of byte k (high_byte / high_shift).
void pack_q6_K(const block_q6_K& b, int r, uint8_t* sb) {
    pack_q6_K_scales(b, r, sb);
    for (int j = 0; j < kLines; ++j) {
        const int e = 8 * j, h = e / 128, k = e % 128 / 32, i = e % 32;
        store_u32(sb + nibble_byte(r, e), nibble_line(b.ql + 64 * h + 32 * (k % 2) + i, k >= 2));
    }
    for (int c = 0; c < QK_K / 16; ++c) {
        const int e = 16 * c, h = e / 128, k = e % 128 / 32, i = e % 32;
        const uint8_t* qh = b.qh + 32 * h + i;
        uint32_t bits = 0;
        for (int q = 0; q < 4; ++q)
            bits |= ((load_u32(qh + 4 * q) >> (2 * k)) & 0x03030303u) << (2 * q);
        store_u32(sb + high_byte(r, e), bits);
    }
}

// pack_q6_K for all 16 rows at once, 4 rows at a time with SSE2 as pack_q4_K_tile: 16 bytes of
// ql give two lines of low and two of high nibbles, and 16 bytes of qh (the top bits of 16
// elements of 4 groups) each group's 4 bytes of high bits.
void pack_q6_K_tile(const uint8_t* const* rows, int64_t b, uint8_t* sb) {
#if defined(__SSE2__)
    pack_q6_K_scales_tile(rows, b, sb);
    const __m128i low4 = _mm_set1_epi8(0x0F), two = _mm_set1_epi8(0x03);
    for (int r0 = 0; r0 < kPackRows; r0 += 4) {
        const block_q6_K* blk[4];
        for (int i = 0; i < 4; ++i) blk[i] = reinterpret_cast<const block_q6_K*>(rows[r0 + i]) + b;
        for (int h = 0; h < 2; ++h) {
            // ql bytes 64h + 16c .. + 15: elements 128h + 32(c / 2) + 16(c % 2) + 0..15 in the low
            // nibbles (lines 16h + 4(c / 2) + 2(c % 2) and + 1), + 64 in the high ones (+ 8).
            for (int c = 0; c < 4; ++c) {
                __m128i lo[4], hi[4];
                for (int i = 0; i < 4; ++i) {
                    const __m128i q = _mm_loadu_si128(
                        reinterpret_cast<const __m128i*>(blk[i]->ql + 64 * h + 16 * c));
                    lo[i] = nibble_lines(_mm_and_si128(q, low4));
                    hi[i] = nibble_lines(_mm_and_si128(_mm_srli_epi16(q, 4), low4));
                }
                const int line = 16 * h + 4 * (c / 2) + 2 * (c % 2);
                store_rows4(lo, sb + nibble_byte(r0, 8 * line), 64);
                store_rows4(hi, sb + nibble_byte(r0, 8 * (line + 8)), 64);
            }
            // qh bytes 32h + 16j .. + 15: bits 2k of element 128h + 32k + 16j + x; group 8h + 2k
            // + j keeps them as byte x % 4, bits 2(x / 4).
            for (int j = 0; j < 2; ++j) {
                for (int k = 0; k < 4; k += 2) {
                    __m128i v[4];
                    for (int i = 0; i < 4; ++i) {
                        const __m128i q = _mm_loadu_si128(
                            reinterpret_cast<const __m128i*>(blk[i]->qh + 32 * h + 16 * j));
                        // groups of k (dword 0) and k + 1 (dword 2)
                        const __m128i y0 = _mm_and_si128(_mm_srli_epi16(q, 2 * k), two);
                        const __m128i y1 = _mm_and_si128(_mm_srli_epi16(q, 2 * k + 2), two);
                        auto fold = [](__m128i y) {  // dword 0 = sum_q y[4q .. 4q + 3] << 2q
                            const __m128i a =
                                _mm_or_si128(y, _mm_slli_epi16(_mm_srli_si128(y, 4), 2));
                            return _mm_or_si128(a, _mm_slli_epi16(_mm_srli_si128(a, 8), 4));
                        };
                        v[i] = _mm_unpacklo_epi64(fold(y0), fold(y1));
                    }
                    // groups 8h + 2k + j (dword 0) and 8h + 2(k + 1) + j, 128 bytes apart
                    store_rows4(v, sb + high_byte(r0, 16 * (8 * h + 2 * k + j)), 128);
                }
            }
        }
    }
#else
    for (int r = 0; r < kPackRows; ++r)
        pack_q6_K(reinterpret_cast<const block_q6_K*>(rows[r])[b], r, sb);
#endif
}

int q4_value(const uint8_t* sb, int r, int e) {
    return (sb[nibble_byte(r, e)] >> nibble_shift(e)) & 0x0F;
}
int q6_value(const uint8_t* sb, int r, int e) {  // u = q + 32
    return ((sb[nibble_byte(r, e)] >> nibble_shift(e)) & 0x0F) |
           (((sb[high_byte(r, e)] >> high_shift(e)) & 3) << 4);
}

// Token t's super-block b in the rearranged activations: its quants, scale and corr entries.
struct ActBlock {
    const int8_t* qs;
    float d;
    const int32_t* corr;
};
ActBlock act_block(const PackedActs& a, int t, int64_t b) {
    const size_t ntok = a.stride / 256, i = b * ntok + t;
    return {reinterpret_cast<const int8_t*>(a.q + b * a.stride + 256 * t), a.d[i],
            a.corr + i * kKqCorr};
}

// Q6_K's corr entries for a Q8_K block's 32 groups of 8 quants: -32 * each group's sum. With
// SSE2, psadbw sums 8 bytes biased to unsigned (q + 128, exact: sum - 8 * 128) two groups at a
// time (one at a time: 22-23 us for the 144 blocks of 9 rows of 4096, 3.1-3.4 us this way, on an
// Intel Xeon).
void q6_half_sums(const int8_t* qs, int32_t* out) {
#if defined(__SSE2__)
    const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80)), zero = _mm_setzero_si128();
    for (int j = 0; j < 16; ++j) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * j));
        const __m128i s = _mm_sad_epu8(_mm_xor_si128(v, bias), zero);  // two sums of 8 (q + 128)
        out[2 * j] = -32 * (_mm_cvtsi128_si32(s) - 8 * 128);
        out[2 * j + 1] = -32 * (_mm_extract_epi16(s, 4) - 8 * 128);
    }
#else
    for (int h = 0; h < 32; ++h) {
        int32_t sum8 = 0;
        for (int e = 8 * h; e < 8 * h + 8; ++e) sum8 += qs[e];
        out[h] = -32 * sum8;
    }
#endif
}

}  // namespace

bool kq_repackable(GGMLType t) {
    return t == GGMLType::Q4_K || t == GGMLType::Q6_K;
}

size_t kq_tile_bytes(GGMLType t, int64_t cols) {
    return static_cast<size_t>(cols / QK_K) * super_bytes(t);
}

void kq_repack(const WeightView& W, uint8_t* dst) {
    if (!kq_repackable(W.type) || W.cols % QK_K != 0) {
        fail("repack: ", type_name(W.type), " weight with ", W.cols, " columns cannot be packed");
    }
    const int64_t nb = W.cols / QK_K, tiles = (W.rows + kPackRows - 1) / kPackRows;
    const size_t sbytes = super_bytes(W.type), tb = kq_tile_bytes(W.type, W.cols);
    for (int64_t ti = 0; ti < tiles; ++ti) {
        uint8_t* tile = dst + ti * tb;
        // A whole tile's rows write every byte they own; the last tile's missing rows are zeros.
        if ((ti + 1) * kPackRows > W.rows) std::memset(tile, 0, tb);
        // Super-block by super-block, its 16 rows each: a record (2-3 KB) is finished while it
        // is in L1, and the tile written once, front to back (row by row, each record was
        // revisited 16 times across a tile of up to ~100 KB).
        const int nrows = static_cast<int>(std::min<int64_t>(kPackRows, W.rows - ti * kPackRows));
        const uint8_t* rows[kPackRows];
        for (int r = 0; r < nrows; ++r) rows[r] = W.row(ti * kPackRows + r);
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t* sb = tile + b * sbytes;
            if (nrows == kPackRows) {
                if (W.type == GGMLType::Q4_K) {
                    pack_q4_K_tile(rows, b, sb);
                } else {
                    pack_q6_K_tile(rows, b, sb);
                }
                continue;
            }
            for (int r = 0; r < nrows; ++r) {
                const uint8_t* src = rows[r];
                if (W.type == GGMLType::Q4_K) {
                    pack_q4_K(reinterpret_cast<const block_q4_K*>(src)[b], r, sb);
                } else {
                    pack_q6_K(reinterpret_cast<const block_q6_K*>(src)[b], r, sb);
                }
            }
        }
    }
}

void kq_dequantize_packed_row(const WeightView& W, int64_t r, float* out) {
    const uint8_t* tile = W.packed + (r / kPackRows) * kq_tile_bytes(W.type, W.cols);
    const int i = static_cast<int>(r % kPackRows);
    const size_t sbytes = super_bytes(W.type);
    for (int64_t b = 0; b < W.cols / QK_K; ++b) {
        const uint8_t* sb = tile + b * sbytes;
        float* y = out + b * QK_K;
        const float d = fp16_to_fp32(load_fp16(sb + 2 * i));
        if (W.type == GGMLType::Q4_K) {  // the operations of ref::dequantize_q4_K
            const float dmin = fp16_to_fp32(load_fp16(sb + 32 + 2 * i));
            for (int s = 0; s < 8; ++s) {
                const float ds = d * sb[64 + 16 * s + i], ms = dmin * sb[192 + 16 * s + i];
                for (int e = 32 * s; e < 32 * s + 32; ++e) y[e] = ds * q4_value(sb, i, e) - ms;
            }
        } else {  // ref::dequantize_q6_K
            for (int e = 0; e < QK_K; ++e) {
                const int sc = static_cast<int8_t>(sb[64 + 16 * (e / 16) + i]);
                y[e] = d * sc * (q6_value(sb, i, e) - 32);
            }
        }
    }
}

size_t kq_act_bytes(int64_t cols, int ntok) {
    return static_cast<size_t>(cols) * ntok;
}
size_t kq_act_floats(int64_t cols, int ntok) {
    return static_cast<size_t>(cols / QK_K) * ntok;
}
size_t kq_act_corrs(int64_t cols, int ntok) {
    return kq_act_floats(cols, ntok) * kKqCorr;
}

PackedActs kq_prepare_acts(const uint8_t* acts, size_t stride, int64_t cols, int ntok, uint8_t* q,
                           float* d, int32_t* corr) {
    const int64_t nb = cols / QK_K;
    for (int t = 0; t < ntok; ++t) {
        const auto* blk = reinterpret_cast<const block_q8_K*>(acts + t * stride);
        for (int64_t b = 0; b < nb; ++b) {
            const size_t i = b * ntok + t;
            std::memcpy(q + i * QK_K, blk[b].qs, QK_K);
            d[i] = blk[b].d;
            int32_t* c = corr + i * kKqCorr;
            for (int g = 0; g < 16; ++g) c[g] = -32 * blk[b].bsums[g];
            int16_t sums[8];
            for (int s = 0; s < 8; ++s) {
                sums[s] = static_cast<int16_t>(blk[b].bsums[2 * s] + blk[b].bsums[2 * s + 1]);
            }
            std::memcpy(c + kKqMinPairs, sums, sizeof sums);
            q6_half_sums(blk[b].qs, c + kKqQ6Halves);
        }
    }
    return {q, static_cast<size_t>(QK_K) * ntok, d, corr, nb};
}

void kq_tile_ref_q4_K(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
                      int64_t ldy) {
    for (int t = 0; t < ntok; ++t) {
        for (int r = lo; r < hi; ++r) {
            float acc = 0.0f;
            for (int64_t b = 0; b < a.nb; ++b) {
                const uint8_t* sb = tile + b * kQ4KSuperBytes;
                const ActBlock yb = act_block(a, t, b);
                int16_t csum[8];  // c_s = bsum_2s + bsum_2s+1
                std::memcpy(csum, yb.corr + kKqMinPairs, sizeof csum);
                int32_t isum = 0, imin = 0;
                for (int s = 0; s < 8; ++s) {
                    int32_t dot = 0;
                    for (int e = 32 * s; e < 32 * s + 32; ++e) dot += q4_value(sb, r, e) * yb.qs[e];
                    isum += sb[64 + 16 * s + r] * dot;
                    imin += sb[192 + 16 * s + r] * csum[s];
                }
                const float dw = fp16_to_fp32(load_fp16(sb + 2 * r));
                const float dmin = fp16_to_fp32(load_fp16(sb + 32 + 2 * r));
                acc = std::fma(static_cast<float>(imin), -(dmin * yb.d), acc);
                acc = std::fma(static_cast<float>(isum), dw * yb.d, acc);
            }
            y[t * ldy + (r - lo)] = acc;
        }
    }
}

void kq_tile_ref_q6_K(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
                      int64_t ldy) {
    for (int t = 0; t < ntok; ++t) {
        for (int r = lo; r < hi; ++r) {
            float acc = 0.0f;
            for (int64_t b = 0; b < a.nb; ++b) {
                const uint8_t* sb = tile + b * kQ6KSuperBytes;
                const ActBlock yb = act_block(a, t, b);
                const int32_t* corr = yb.corr;
                int32_t isum = 0;
                for (int g = 0; g < 16; ++g) {
                    int32_t dot = corr[g];
                    for (int e = 16 * g; e < 16 * g + 16; ++e) dot += q6_value(sb, r, e) * yb.qs[e];
                    isum += static_cast<int8_t>(sb[64 + 16 * g + r]) * dot;
                }
                const float dw = fp16_to_fp32(load_fp16(sb + 2 * r));
                acc = std::fma(static_cast<float>(isum), dw * yb.d, acc);
            }
            y[t * ldy + (r - lo)] = acc;
        }
    }
}

}  // namespace specula
