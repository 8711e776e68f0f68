// Rotates the heads of token gl_WorkGroupID.y in place with the cos/sin pairs the host computed
// for its position (model/rope.h: "normal" rotates (2i, 2i+1), NEOX rotates (i, i + n_rot/2)).
// One workgroup per (head, token). cs_off: where this layer's angles start in the pass buffer's
// cs (a sliding-window layer of gemma3 rotates with its own base: a second set of angles).
#version 450

layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Pass { int pos0; int pad0, pad1, pad2; float cs[]; };
layout(push_constant) uniform PC { uint head_dim, n_rot, neox, ld, cs_off; } pc;

void main() {
    const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    const uint base = t * pc.ld + h * pc.head_dim, half_rot = pc.n_rot / 2u;
    for (uint i = gl_LocalInvocationID.x; i < half_rot; i += 64u) {
        const uint ci = pc.cs_off + t * pc.n_rot + 2u * i;
        const float c = cs[ci], s = cs[ci + 1u];
        const uint a = base + (pc.neox != 0u ? i : 2u * i);
        const uint b = base + (pc.neox != 0u ? i + half_rot : 2u * i + 1u);
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}
