// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for the row r of this workgroup (rows of n floats:
// a token's hidden state, or one head of a token for the per-head Q/K norm; the row index is
// y * groups_x + x, so more rows than one dimension holds can be dispatched in two). The sum of
// squares is 64 strided partial sums added in a fixed tree (the same for any batch size). In
// place (x and y one buffer) is allowed: each value is read before the same thread writes it.
#version 450

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform PC { uint n, in_off, out_off; float eps; } pc;

shared float red[64];

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint xi = pc.in_off + row * pc.n, yi = pc.out_off + row * pc.n;
    float s = 0.0;
    for (uint i = tid; i < pc.n; i += 64u) s += x[xi + i] * x[xi + i];
    red[tid] = s;
    barrier();
    for (uint stride = 32u; stride > 0u; stride >>= 1) {
        if (tid < stride) red[tid] += red[tid + stride];
        barrier();
    }
    const float scale = 1.0 / sqrt(red[0] / float(pc.n) + pc.eps);
    for (uint i = tid; i < pc.n; i += 64u) y[yi + i] = x[xi + i] * scale * w[i];
}
