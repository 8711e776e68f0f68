// g = gelu(g) * u over n floats: GELU's tanh approximation as model/ops.h defines it,
// 0.5 v (1 + tanh(sqrt(2/pi) v (1 + 0.044715 v^2))), v itself from 10 up and 0 from -10 down.
#version 450

layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(push_constant) uniform PC { uint n; } pc;

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u +
                   gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    const float v = g[i];
    float a = v >= 10.0 ? v : 0.0;
    if (v > -10.0 && v < 10.0) a = 0.5 * v * (1.0 + tanh(0.7978845608028654 * v * (1.0 + 0.044715 * v * v)));
    g[i] = a * u[i];
}
