// Helpers for the kernel tests (test_simd, test_matmul): random weight rows of any supported type
// with sane scales, random activations, the list of weight types, and a guard that caps the SIMD
// level of the kernel policy (kernels/policy.h) for the duration of a scope.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gguf/ggml_types.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/policy.h"
#include "kernels/table.h"

namespace specula::test {

// Every weight type the engine computes with.
inline const std::vector<GGMLType>& weight_types() {
    static const std::vector<GGMLType> types = {
        GGMLType::F32,  GGMLType::F16,    GGMLType::BF16,   GGMLType::Q4_0,
        GGMLType::Q4_1, GGMLType::Q5_0,   GGMLType::Q5_1,   GGMLType::Q8_0,
        GGMLType::Q2_K, GGMLType::Q3_K,   GGMLType::Q4_K,   GGMLType::Q5_K,
        GGMLType::Q6_K, GGMLType::IQ4_NL, GGMLType::IQ4_XS, GGMLType::MXFP4};
    return types;
}

// The levels this CPU can run, scalar first.
inline std::vector<SimdLevel> runnable_levels() {
    std::vector<SimdLevel> levels;
    for (int l = 0; l <= static_cast<int>(cpu_simd_level()); ++l) {
        levels.push_back(static_cast<SimdLevel>(l));
    }
    return levels;
}

// The policy p with its SIMD level capped at l, as SPECULA_SIMD=<l> sets it: a cap below `amx`
// turns the AMX hardware off (an emulated AMX stays, as SPECULA_AMX=emulate keeps it).
inline KernelPolicy capped(KernelPolicy p, SimdLevel l) {
    p.simd_cap = l;
    if (p.amx == AmxMode::Hardware) p.amx = AmxMode::Off;
    return p;
}

// Caps the SIMD level of the kernel policy for a scope and restores the previous policy.
class SimdCap : public ScopedKernelPolicy {
  public:
    explicit SimdCap(SimdLevel l) : ScopedKernelPolicy(capped(kernel_policy(), l)) {}
};

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.f,
                                        float hi = 1.f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
}

namespace detail {
inline void put_fp16(uint8_t* p, float v) {
    const fp16_t h = fp32_to_fp16(v);
    std::memcpy(p, &h, sizeof h);
}
// Offsets of the fp16 scale fields (d, and m/dmin where the format has one) in a block.
struct ScaleFields {
    int d = -1, m = -1;
};
inline ScaleFields scale_fields(GGMLType t) {
    switch (t) {
        case GGMLType::Q4_0:
            return {offsetof(block_q4_0, d)};
        case GGMLType::Q4_1:
            return {offsetof(block_q4_1, d), offsetof(block_q4_1, m)};
        case GGMLType::Q5_0:
            return {offsetof(block_q5_0, d)};
        case GGMLType::Q5_1:
            return {offsetof(block_q5_1, d), offsetof(block_q5_1, m)};
        case GGMLType::Q8_0:
            return {offsetof(block_q8_0, d)};
        case GGMLType::Q2_K:
            return {offsetof(block_q2_K, d), offsetof(block_q2_K, dmin)};
        case GGMLType::Q3_K:
            return {offsetof(block_q3_K, d)};
        case GGMLType::Q4_K:
            return {offsetof(block_q4_K, d), offsetof(block_q4_K, dmin)};
        case GGMLType::Q5_K:
            return {offsetof(block_q5_K, d), offsetof(block_q5_K, dmin)};
        case GGMLType::Q6_K:
            return {offsetof(block_q6_K, d)};
        case GGMLType::IQ4_NL:
            return {offsetof(block_iq4_nl, d)};
        case GGMLType::IQ4_XS:
            return {offsetof(block_iq4_xs, d)};
        default:
            return {};
    }
}
}  // namespace detail

// `rows` rows of `cols` elements of type t: random bytes for the quantized payload (every bit
// pattern is a valid block) and random scales of either sign in [0.001, 0.05] for the fp16 fields;
// MXFP4's E8M0 exponents are 2^-12 .. 2^-3, with every 7th block at the subnormal or smallest
// exponents 0, 1, 2. Float types get values in [-1, 1].
inline std::vector<uint8_t> random_weights(std::mt19937& rng, GGMLType t, int64_t rows,
                                           int64_t cols) {
    const size_t rb = row_size(t, cols);
    std::vector<uint8_t> buf(rb * rows);
    if (t == GGMLType::F32 || t == GGMLType::F16 || t == GGMLType::BF16) {
        const auto v = random_floats(rng, static_cast<size_t>(rows * cols));
        for (size_t i = 0; i < v.size(); ++i) {
            if (t == GGMLType::F32) {
                std::memcpy(buf.data() + 4 * i, &v[i], 4);
            } else {
                const uint16_t h = t == GGMLType::F16 ? fp32_to_fp16(v[i]) : fp32_to_bf16(v[i]);
                std::memcpy(buf.data() + 2 * i, &h, 2);
            }
        }
        return buf;
    }
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : buf) b = static_cast<uint8_t>(byte(rng));
    std::uniform_real_distribution<float> mag(0.001f, 0.05f);
    std::bernoulli_distribution neg(0.5);
    const size_t bs = type_traits(t).type_size;
    if (t == GGMLType::MXFP4) {
        std::uniform_int_distribution<int> e(115, 124);
        for (size_t off = 0, i = 0; off < buf.size(); off += bs, ++i) {
            buf[off + offsetof(block_mxfp4, e)] =
                static_cast<uint8_t>(i % 7 == 6 ? (i / 7) % 3 : e(rng));
        }
        return buf;
    }
    const auto f = detail::scale_fields(t);
    for (size_t off = 0; off < buf.size(); off += bs) {
        detail::put_fp16(buf.data() + off + f.d, neg(rng) ? -mag(rng) : mag(rng));
        if (f.m >= 0) detail::put_fp16(buf.data() + off + f.m, neg(rng) ? -mag(rng) : mag(rng));
    }
    return buf;
}

}  // namespace specula::test
