// Split-K causal attention, second half: one workgroup per (query head, token t of the group
// from t0) merges the segments its query saw (attention_split.comp's partials: segments lo / seg
// to (pos0 + t0 + t) / seg) one after the other in position order, m = max(m, m_s),
// l = l e^(m_old - m) + l_s e^(m_s - m), acc likewise, and writes acc / l. The segments and
// their order depend only on the query's position, never on the pass.
#version 450

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) writeonly buffer O { float o[]; };
layout(std430, binding = 2) readonly buffer Pass { int pos0; };
layout(push_constant) uniform PC {
    uint n_head, head_dim, ld_q, window, t0, seg, n_seg, ml_off;
} pc;

void main() {
    const uint h = gl_WorkGroupID.x, tq = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    const uint hd = pc.head_dim;
    const uint n_kv = uint(pos0) + pc.t0 + tq + 1u;
    const uint lo = pc.window > 0u && n_kv > pc.window ? n_kv - pc.window : 0u;
    const uint first = lo / pc.seg, last = (n_kv - 1u) / pc.seg;
    const uint rec0 = (tq * pc.n_head + h) * pc.n_seg;
    for (uint d = tid; d < hd; d += 64u) {
        uint rec = rec0 + first;
        float m = part[pc.ml_off + 2u * rec], l = part[pc.ml_off + 2u * rec + 1u];
        float acc = part[rec * hd + d];
        for (uint s = first + 1u; s <= last; ++s) {
            rec = rec0 + s;
            const float ms = part[pc.ml_off + 2u * rec], m_new = max(m, ms);
            const float ra = exp(m - m_new), rb = exp(ms - m_new);
            l = l * ra + part[pc.ml_off + 2u * rec + 1u] * rb;
            acc = acc * ra + part[rec * hd + d] * rb;
            m = m_new;
        }
        o[(pc.t0 + tq) * pc.ld_q + h * hd + d] = acc * (1.0 / l);
    }
}
