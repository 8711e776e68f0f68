// Split-K causal attention, first half ("flash-decoding"): one workgroup per (KV head, segment
// of `seg` cache positions, from the first segment any of its queries sees) for up to QT queries
// of that KV head (its g query heads x ntok tokens of the pass from t0). A query at pos0 + t sees
// rows [lo, pos0 + t] of one layer, lo = 0, or in a sliding-window layer (window > 0)
// pos0 + t - window + 1 (as attention.comp). The segment's K and V rows are read from the cache
// once, in chunks of CHUNK rows into shared memory, and serve every query of the workgroup. A
// query is LANES threads, each holding DPL of its dimensions (q read per chunk, the output
// accumulator kept); a score is their partial dots (dimensions in order) added by a fixed xor
// tree. Per query, the chunks it meets go in position order: scores, the chunk's max, exps and
// their sum in position order, then an online rescale of (m, l, acc) and acc += p_j v_j in
// position order. Chunks start at multiples of CHUNK and a query skips the rows outside its
// range, so what it computes depends only on its q, its position and the cache, never on the
// pass's size, the workgroup's size or the other queries (batch invariance). Its (m, l, acc) for
// the segment go to the partials (record (t * n_head + h) * n_seg + seg: acc at record *
// head_dim, m and l at ml_off + 2 record); attention_combine.comp merges a query's segments in
// order. Compiled per head size and workgroup size (CMakeLists.txt): WG threads, DPL dimensions
// per lane, LANES (1, 2, 4 or 8; subgroups of at least LANES), CHUNK rows per chunk.
#version 450
#extension GL_EXT_control_flow_attributes : enable
#if LANES > 1
#extension GL_KHR_shader_subgroup_shuffle : enable
#endif

#define QT (WG / LANES)  // queries per workgroup

layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KC { float kc[]; };
layout(std430, binding = 2) readonly buffer VC { float vc[]; };
layout(std430, binding = 3) writeonly buffer Part { float part[]; };
layout(std430, binding = 4) readonly buffer Pass { int pos0; };
layout(push_constant) uniform PC {
    uint n_head, n_head_kv, head_dim, layer_off, ld_q, ld_kv;
    float scale;
    uint window, t0, ntok, seg, n_seg, ml_off;
} pc;

shared float ks[CHUNK * DPL * LANES];
shared float vs[CHUNK * DPL * LANES];

// The first row seen by the query whose last row is n_kv - 1.
uint first_row(uint n_kv) {
    return pc.window > 0u && n_kv > pc.window ? n_kv - pc.window : 0u;
}

void main() {
    const uint p0 = uint(pos0) + pc.t0;  // the position of the group's first token
    const uint kvh = gl_WorkGroupID.x, sg = gl_WorkGroupID.y + first_row(p0 + 1u) / pc.seg;
    const uint g = pc.n_head / pc.n_head_kv, hd = pc.head_dim, tid = gl_LocalInvocationID.x;
    const uint qi = tid / LANES, d0 = (tid % LANES) * DPL;
    const uint tq = qi / g, h = kvh * g + qi % g;
    const uint s0 = sg * pc.seg, s1 = s0 + pc.seg;
    // The rows any query of the workgroup sees: [w_lo, w_hi).
    const uint w_lo = max(s0, first_row(p0 + 1u)), w_hi = min(s1, p0 + pc.ntok);
    if (w_lo >= w_hi) return;
    // This query's rows in the segment: [a, b), empty for the threads past the last query.
    const bool live = tq < pc.ntok;
    const uint n_kv = p0 + tq + 1u;
    const uint a = live ? max(s0, first_row(n_kv)) : 0u, b = live ? min(s1, n_kv) : 0u;
    const uint qb = (pc.t0 + tq) * pc.ld_q + h * hd + d0;
    float acc[DPL];
    [[unroll]] for (uint i = 0; i < DPL; ++i) acc[i] = 0.0;
    float m = -1.0 / 0.0, l = 0.0;
    const uint kv0 = pc.layer_off + kvh * hd;
    for (uint c0 = w_lo - (w_lo - s0) % CHUNK; c0 < w_hi; c0 += CHUNK) {
        const uint n = min(CHUNK, w_hi - c0) * hd;
        for (uint e = tid; e < n; e += WG) {
            const uint r = e / hd, src = kv0 + (c0 + r) * pc.ld_kv + (e - r * hd);
            ks[e] = kc[src];
            vs[e] = vc[src];
        }
        barrier();
        if (c0 < b && c0 + CHUNK > a) {  // the same for a query's LANES threads
            float qv[DPL], s[CHUNK];  // q is read per chunk: less to keep across barriers
            [[unroll]] for (uint i = 0; i < DPL; ++i) qv[i] = d0 + i < hd ? q[qb + i] : 0.0;
            [[unroll]] for (uint j = 0; j < CHUNK; ++j) {
                float x = 0.0;
                [[unroll]] for (uint i = 0; i < DPL; ++i) {
                    if (d0 + i < hd) x += qv[i] * ks[j * hd + d0 + i];
                }
#if LANES > 1
                x += subgroupShuffleXor(x, 1u);
#endif
#if LANES > 2
                x += subgroupShuffleXor(x, 2u);
#endif
#if LANES > 4
                x += subgroupShuffleXor(x, 4u);
#endif
                s[j] = x * pc.scale;  // rows outside [a, b) are masked below
            }
            float mc = -1.0 / 0.0;
            [[unroll]] for (uint j = 0; j < CHUNK; ++j) {
                if (c0 + j >= a && c0 + j < b) mc = max(mc, s[j]);
            }
            const float m_new = max(m, mc), r = exp(m - m_new);
            float sum = 0.0;
            [[unroll]] for (uint j = 0; j < CHUNK; ++j) {
                s[j] = c0 + j >= a && c0 + j < b ? exp(s[j] - m_new) : 0.0;
                sum += s[j];
            }
            l = l * r + sum;
            [[unroll]] for (uint i = 0; i < DPL; ++i) {
                if (d0 + i < hd) {
                    float v = acc[i] * r;
                    [[unroll]] for (uint j = 0; j < CHUNK; ++j) {
                        if (c0 + j >= a && c0 + j < b) v += s[j] * vs[j * hd + d0 + i];
                    }
                    acc[i] = v;
                }
            }
            m = m_new;
        }
        barrier();
    }
    if (a >= b) return;
    const uint rec = (tq * pc.n_head + h) * pc.n_seg + sg;
    [[unroll]] for (uint i = 0; i < DPL; ++i) {
        if (d0 + i < hd) part[rec * hd + d0 + i] = acc[i];
    }
    if (d0 == 0u) {
        part[pc.ml_off + 2u * rec] = m;
        part[pc.ml_off + 2u * rec + 1u] = l;
    }
}
