// y[t][r] = sum_c W[r][c] * x[t][c] for every row r and token t < ntok, with W in its GGUF block
// layout (compiled once per type: -DTYPE_F32, TYPE_F16, TYPE_BF16, TYPE_Q8_0, TYPE_Q4_0,
// TYPE_Q4_K, TYPE_Q5_K, TYPE_Q6_K). A workgroup of 64 threads takes ROWS rows, LANES threads
// per row: lane i takes 32-element units i, i + LANES, ... of its row, decodes each unit once
// and applies it to every token of the pass; the LANES partial sums are then added in a fixed
// tree. A token's sum therefore runs in the same order whatever ntok is (batch invariance).
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform PC {
    uint rows, cols, ntok, in_off, ld_in, out_off, ld_out;
} pc;

#define MAXT 16  // tokens per weight tile: one decode serves up to 16 columns
#define LANES 16u
#define ROWS 4u
shared float red[MAXT][64];

uint u8(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }
uint u16(uint b) { return u8(b) | (u8(b + 1u) << 8); }
float f16(uint b) { return unpackHalf2x16(u16(b)).x; }
int i8(uint b) { return int(u8(b) << 24) >> 24; }

// Decodes elements [32u, 32u + 32) of row `row` into v.
void decode(uint row, uint u, inout float v[32]) {
#if defined(TYPE_F32)
    const uint e = row * pc.cols + u * 32u;
    [[unroll]] for (uint j = 0; j < 32u; ++j) {
        v[j] = u * 32u + j < pc.cols ? uintBitsToFloat(w[e + j]) : 0.0;
    }
#elif defined(TYPE_F16) || defined(TYPE_BF16)
    const uint e = (row * pc.cols + u * 32u) >> 1;  // cols is even (weights.cpp)
    [[unroll]] for (uint j = 0; j < 16u; ++j) {
        const uint p = u * 32u + 2u * j < pc.cols ? w[e + j] : 0u;
#if defined(TYPE_F16)
        const vec2 f = unpackHalf2x16(p);
        v[2 * j] = f.x;
        v[2 * j + 1] = f.y;
#else
        v[2 * j] = uintBitsToFloat(p << 16);
        v[2 * j + 1] = uintBitsToFloat(p & 0xFFFF0000u);
#endif
    }
#elif defined(TYPE_Q8_0)
    const uint b = row * (pc.cols / 32u) * 34u + u * 34u;
    const float d = f16(b);
    [[unroll]] for (uint j = 0; j < 32u; ++j) v[j] = d * float(i8(b + 2u + j));
#elif defined(TYPE_Q4_0)
    const uint b = row * (pc.cols / 32u) * 18u + u * 18u;
    const float d = f16(b);
    [[unroll]] for (uint j = 0; j < 16u; ++j) {
        const uint q = u8(b + 2u + j);
        v[j] = d * float(int(q & 15u) - 8);
        v[j + 16u] = d * float(int(q >> 4) - 8);
    }
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#if defined(TYPE_Q4_K)
    const uint bs = 144u, qs_off = 16u;
#else
    const uint bs = 176u, qs_off = 48u;
#endif
    const uint s = u & 7u;  // sub-block of 32 in the 256-element super-block
    const uint b = row * (pc.cols / 256u) * bs + (u >> 3) * bs;
    const float d = f16(b), dmin = f16(b + 2u);
    const uint sc0 = b + 4u;  // 12 bytes of packed 6-bit scales and mins
    uint sc, m;
    if (s < 4u) {
        sc = u8(sc0 + s) & 63u;
        m = u8(sc0 + s + 4u) & 63u;
    } else {
        sc = (u8(sc0 + s + 4u) & 15u) | ((u8(sc0 + s - 4u) >> 6) << 4);
        m = (u8(sc0 + s + 4u) >> 4) | ((u8(sc0 + s) >> 6) << 4);
    }
    const float dl = d * float(sc), ml = dmin * float(m);
    const uint q0 = b + qs_off + 32u * (s >> 1);
    const uint shift = (s & 1u) * 4u;
    [[unroll]] for (uint j = 0; j < 32u; ++j) {
        uint q = (u8(q0 + j) >> shift) & 15u;
#if defined(TYPE_Q5_K)
        q += ((u8(b + 16u + j) >> s) & 1u) << 4;
#endif
        v[j] = dl * float(q) - ml;
    }
#elif defined(TYPE_Q6_K)
    const uint s = u & 7u;
    const uint b = row * (pc.cols / 256u) * 210u + (u >> 3) * 210u;
    const uint n = s >> 2, quarter = s & 3u;
    const uint ql = b + n * 64u + (quarter & 1u) * 32u;
    const uint qh = b + 128u + n * 32u;
    const uint sc = b + 192u + n * 8u + quarter * 2u;
    const float d = f16(b + 208u);
    const uint lshift = (quarter >> 1) * 4u, hshift = quarter * 2u;
    [[unroll]] for (uint j = 0; j < 32u; ++j) {
        const uint q = ((u8(ql + j) >> lshift) & 15u) | (((u8(qh + j) >> hshift) & 3u) << 4);
        v[j] = d * float(i8(sc + j / 16u)) * float(int(q) - 32);
    }
#else
#error "matvec.comp: no TYPE_* defined"
#endif
}

// Plain types allow rows that are not a multiple of 32: the last unit is cut short.
#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
#define XAT(i, c) ((c) < pc.cols ? x[i] : 0.0)
#else
#define XAT(i, c) x[i]
#endif

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint lane = tid % LANES;
    const uint row = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * ROWS + tid / LANES;
    const bool live = row < pc.rows;
    const uint units = (pc.cols + 31u) / 32u;
    float v[32];
    for (uint t0 = 0; t0 < pc.ntok; t0 += MAXT) {
        const uint nt = min(uint(MAXT), pc.ntok - t0);
        float acc[MAXT];
        [[unroll]] for (uint k = 0; k < MAXT; ++k) acc[k] = 0.0;
        if (live) {
            for (uint u = lane; u < units; u += LANES) {
                decode(row, u, v);
                for (uint k = 0; k < nt; ++k) {
                    const uint xb = pc.in_off + (t0 + k) * pc.ld_in + u * 32u;
                    float s = 0.0;
                    [[unroll]] for (uint j = 0; j < 32u; ++j) s += v[j] * XAT(xb + j, u * 32u + j);
                    acc[k] += s;
                }
            }
        }
        [[unroll]] for (uint k = 0; k < MAXT; ++k) red[k][tid] = acc[k];
        barrier();
        [[unroll]] for (uint stride = LANES / 2u; stride > 0u; stride >>= 1) {
            if (lane < stride) {
                for (uint k = 0; k < nt; ++k) red[k][tid] += red[k][tid + stride];
            }
            barrier();
        }
        if (live && lane < nt) {
            y[pc.out_off + (t0 + lane) * pc.ld_out + row] = red[lane][tid - lane];
        }
        barrier();
    }
}
