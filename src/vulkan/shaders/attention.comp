// Causal attention of one (query head, token) per workgroup over cache rows [lo, pos0 + t] of
// one layer, grouped KV heads; lo = 0, or in a sliding-window layer (window > 0) the first of
// the window's rows: pos0 + t - window + 1 (model/hparams.h's n_swa). Positions go in chunks of 64 in order (one per thread): scores,
// the chunk's max and exp-sum in a fixed tree, then a running (online) softmax rescale of the
// output accumulators. The order depends only on the position, never on the batch size.
#version 450

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KC { float kc[]; };
layout(std430, binding = 2) readonly buffer VC { float vc[]; };
layout(std430, binding = 3) writeonly buffer O { float o[]; };
layout(std430, binding = 4) readonly buffer Pass { int pos0; };
layout(push_constant) uniform PC {
    uint n_head, n_head_kv, head_dim, layer_off, ld_q, ld_kv;
    float scale;
    uint window;
} pc;

shared float qs[256];
shared float p[64];
shared float red[64];

void main() {
    const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    const uint kvh = h / (pc.n_head / pc.n_head_kv);
    const uint n_kv = uint(pos0) + t + 1u;
    const uint lo = pc.window > 0u && n_kv > pc.window ? n_kv - pc.window : 0u;
    const uint qb = t * pc.ld_q + h * pc.head_dim;
    for (uint d = tid; d < pc.head_dim; d += 64u) qs[d] = q[qb + d];
    barrier();
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    float m = -1.0 / 0.0, l = 0.0;
    for (uint c0 = lo; c0 < n_kv; c0 += 64u) {
        const uint pos = c0 + tid;
        float s = -1.0 / 0.0;
        if (pos < n_kv) {
            const uint kb = pc.layer_off + pos * pc.ld_kv + kvh * pc.head_dim;
            s = 0.0;
            for (uint d = 0; d < pc.head_dim; ++d) s += qs[d] * kc[kb + d];
            s *= pc.scale;
        }
        red[tid] = s;
        barrier();
        for (uint stride = 32u; stride > 0u; stride >>= 1) {
            if (tid < stride) red[tid] = max(red[tid], red[tid + stride]);
            barrier();
        }
        const float m_new = max(m, red[0]);
        barrier();
        const float e = pos < n_kv ? exp(s - m_new) : 0.0;
        p[tid] = e;
        red[tid] = e;
        barrier();
        for (uint stride = 32u; stride > 0u; stride >>= 1) {
            if (tid < stride) red[tid] += red[tid + stride];
            barrier();
        }
        const float r = exp(m - m_new);
        l = l * r + red[0];
        const uint n_c = min(64u, n_kv - c0);
        for (uint k = 0; k < 4u; ++k) {
            const uint d = tid + 64u * k;
            if (d >= pc.head_dim) break;
            float a = acc[k] * r;
            for (uint j = 0; j < n_c; ++j) {
                a += p[j] * vc[pc.layer_off + (c0 + j) * pc.ld_kv + kvh * pc.head_dim + d];
            }
            acc[k] = a;
        }
        m = m_new;
        barrier();
    }
    const float inv = 1.0 / l;
    for (uint k = 0; k < 4u; ++k) {
        const uint d = tid + 64u * k;
        if (d < pc.head_dim) o[qb + d] = acc[k] * inv;
    }
}
