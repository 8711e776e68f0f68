// Memory layouts of the quantized blocks, byte for byte as GGUF stores them.
// Each block holds `block_size` consecutive elements of one row.
#pragma once

#include <cstdint>

#include "kernels/layout/fp16.h"

namespace specula {

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
constexpr int QK4_NL = 32;
constexpr int QK_MXFP4 = 32;
constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

#pragma pack(push, 1)
struct block_q4_0 {  // x = d * (q - 8)
    fp16_t d;
    uint8_t qs[QK4_0 / 2];  // element j in low nibble of qs[j], element j+16 in high nibble
};
struct block_q4_1 {  // x = d * q + m
    fp16_t d, m;
    uint8_t qs[QK4_1 / 2];
};
struct block_q5_0 {  // x = d * (q - 16), 5th bit of element j in bit j of qh
    fp16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
};
struct block_q5_1 {
    fp16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};
struct block_q8_0 {  // x = d * q
    fp16_t d;
    int8_t qs[QK8_0];
};
struct block_q8_1 {  // x = d * q; s = d * sum(q)
    fp16_t d, s;
    int8_t qs[QK8_1];
};
struct block_q2_K {
    uint8_t scales[QK_K / 16];  // 4-bit scale and 4-bit min per 16 elements
    uint8_t qs[QK_K / 4];
    fp16_t d, dmin;
};
struct block_q3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];  // 16 6-bit scales
    fp16_t d;
};
struct block_q4_K {
    fp16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];  // 8 6-bit scales and 8 6-bit mins
    uint8_t qs[QK_K / 2];
};
struct block_q5_K {
    fp16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
struct block_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    fp16_t d;
};
struct block_q8_K {  // activation format for the K-quants and IQ4_XS
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];  // sums of groups of 16
};
struct block_iq4_nl {
    fp16_t d;
    uint8_t qs[QK4_NL / 2];
};
struct block_iq4_xs {
    fp16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
};
// MXFP4 (OCP microscaling): e is an E8M0 exponent, the block's scale 2^(e - 127); each nibble an
// E2M1 value, stored through kvalues_mxfp4 (the values doubled, so the scale applied is
// 2^(e - 128)). Nibble order as in Q4_0. 17 bytes: no alignment.
struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
};
#pragma pack(pop)

static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q8_1) == 36);
static_assert(sizeof(block_q2_K) == 84);
static_assert(sizeof(block_q3_K) == 110);
static_assert(sizeof(block_q4_K) == 144);
static_assert(sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210);
static_assert(sizeof(block_q8_K) == 292);
static_assert(sizeof(block_iq4_nl) == 18);
static_assert(sizeof(block_iq4_xs) == 136);
static_assert(sizeof(block_mxfp4) == 17);

// The 16 non-linear levels of IQ4_NL / IQ4_XS.
constexpr int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

// The E2M1 values of MXFP4, doubled to integers: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
constexpr int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4's scale for E8M0 exponent e, halved (kvalues_mxfp4 holds doubled values): 2^(e - 128),
// as float bits (e = 0 and 1 give the subnormals 2^-128 and 2^-127). Exact.
constexpr uint32_t mxfp4_half_scale_bits(uint8_t e) {
    return e >= 2 ? static_cast<uint32_t>(e - 1) << 23 : (e == 0 ? 0x00200000u : 0x00400000u);
}

}  // namespace specula
