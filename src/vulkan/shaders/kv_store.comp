// Copies the K and V rows of token gl_WorkGroupID.y into the device cache at row pos0 + t of
// the layer that starts at layer_off.
#version 450

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 2) writeonly buffer KC { float kc[]; };
layout(std430, binding = 3) writeonly buffer VC { float vc[]; };
layout(std430, binding = 4) readonly buffer Pass { int pos0; };
layout(push_constant) uniform PC { uint width, layer_off; } pc;

void main() {
    const uint i = gl_WorkGroupID.x * 64u + gl_LocalInvocationID.x, t = gl_WorkGroupID.y;
    if (i >= pc.width) return;
    const uint dst = pc.layer_off + (uint(pos0) + t) * pc.width + i;
    kc[dst] = k[t * pc.width + i];
    vc[dst] = v[t * pc.width + i];
}
