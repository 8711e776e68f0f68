// y[y_off + t * ld_y + i] += x[x_off + t * ld_x + i] for i < width and token t = workgroup y
// (ld_x = 0 broadcasts a bias row).
#version 450

layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform PC { uint width, y_off, ld_y, x_off, ld_x; } pc;

void main() {
    const uint i = gl_WorkGroupID.x * 64u + gl_LocalInvocationID.x, t = gl_WorkGroupID.y;
    if (i >= pc.width) return;
    y[pc.y_off + t * pc.ld_y + i] += x[pc.x_off + t * pc.ld_x + i];
}
