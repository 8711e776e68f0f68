// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w for the token of this workgroup; the sum of squares
// is 64 strided partial sums added in a fixed tree (the same for any batch size).
#version 450

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform PC { uint n, in_off, out_off; float eps; } pc;

shared float red[64];

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint xi = pc.in_off + gl_WorkGroupID.x * pc.n, yi = pc.out_off + gl_WorkGroupID.x * pc.n;
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
