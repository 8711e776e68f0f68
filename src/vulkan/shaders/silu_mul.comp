// g = silu(g) * u over n floats.
#version 450

layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(push_constant) uniform PC { uint n; } pc;

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u +
                   gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    const float a = g[i];
    g[i] = a / (1.0 + exp(-a)) * u[i];
}
