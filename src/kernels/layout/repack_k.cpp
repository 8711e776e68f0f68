// The tiled Q4_K / Q6_K layout (see repack_k.h): repacking, reading a row back, the Q6_K
// activation offsets and the scalar reference tile kernels.
#include "kernels/layout/repack_k.h"

#include <cmath>
#include <cstring>

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

// Row r's 4-bit values of a super-block (v: 256 values, each < 16) into the quant lines: line j
// holds elements 8j..8j+3 in the low nibbles of its row's 4 bytes and 8j+4..8j+7 in the high ones
// (nibble_byte / nibble_shift). Every byte of the row is written whole, once.
void pack_nibbles(const uint8_t* v, int r, uint8_t* sb) {
    for (int j = 0; j < kLines; ++j) {
        uint8_t* line = sb + nibble_byte(r, 8 * j);
        for (int k = 0; k < 4; ++k) {
            line[k] = static_cast<uint8_t>(v[8 * j + k] | (v[8 * j + 4 + k] << 4));
        }
    }
}

// The values a block holds, all 256 at once (ref::q4_K_value / q6_K_value one by one were 2/3 of
// the time an 8B Q4_K_M file took to load).
void q4_K_values(const block_q4_K& b, uint8_t* v) {
    for (int g = 0; g < QK_K / 64; ++g) {
        for (int i = 0; i < 32; ++i) {
            const uint8_t q = b.qs[32 * g + i];
            v[64 * g + i] = q & 0x0F;
            v[64 * g + 32 + i] = q >> 4;
        }
    }
}
void q6_K_values(const block_q6_K& b, uint8_t* u) {  // u = q + 32, 0..63
    for (int half = 0; half < 2; ++half) {
        for (int k = 0; k < 4; ++k) {
            for (int i = 0; i < 32; ++i) {
                const uint8_t ql = b.ql[64 * half + (k % 2) * 32 + i];
                const int low = k < 2 ? (ql & 0x0F) : (ql >> 4);
                const int high = (b.qh[32 * half + i] >> (2 * k)) & 3;
                u[128 * half + 32 * k + i] = static_cast<uint8_t>(low | (high << 4));
            }
        }
    }
}

void pack_q4_K(const block_q4_K& b, int r, uint8_t* sb) {
    std::memcpy(sb + 2 * r, &b.d, 2);
    std::memcpy(sb + 32 + 2 * r, &b.dmin, 2);
    for (int s = 0; s < 8; ++s) {
        int sc, m;
        ref::get_scale_min_k4(s, b.scales, &sc, &m);
        sb[64 + 16 * s + r] = static_cast<uint8_t>(sc);
        sb[192 + 16 * s + r] = static_cast<uint8_t>(m);
    }
    uint8_t v[QK_K];
    q4_K_values(b, v);
    pack_nibbles(v, r, sb);
}

void pack_q6_K(const block_q6_K& b, int r, uint8_t* sb) {
    std::memcpy(sb + 2 * r, &b.d, 2);
    std::memset(sb + 32 + 2 * r, 0, 2);  // the layout's zeros (no dmin)
    for (int g = 0; g < 16; ++g) sb[64 + 16 * g + r] = static_cast<uint8_t>(b.scales[g]);
    uint8_t u[QK_K], low[QK_K];
    q6_K_values(b, u);
    for (int e = 0; e < QK_K; ++e) low[e] = u[e] & 0x0F;
    pack_nibbles(low, r, sb);
    // The top 2 bits: group h of 16 elements in row r's 4 bytes at high_byte(r, 16h), element
    // 16h + 4q + k in bits 2q..2q+1 of byte k (high_byte / high_shift).
    for (int h = 0; h < QK_K / 16; ++h) {
        uint8_t* hb = sb + high_byte(r, 16 * h);
        for (int k = 0; k < 4; ++k) {
            int byte = 0;
            for (int q = 0; q < 4; ++q) byte |= (u[16 * h + 4 * q + k] >> 4) << (2 * q);
            hb[k] = static_cast<uint8_t>(byte);
        }
    }
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
        for (int r = 0; r < kPackRows && ti * kPackRows + r < W.rows; ++r) {
            const uint8_t* src = W.row(ti * kPackRows + r);
            for (int64_t b = 0; b < nb; ++b) {
                if (W.type == GGMLType::Q4_K) {
                    pack_q4_K(reinterpret_cast<const block_q4_K*>(src)[b], r, tile + b * sbytes);
                } else {
                    pack_q6_K(reinterpret_cast<const block_q6_K*>(src)[b], r, tile + b * sbytes);
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
