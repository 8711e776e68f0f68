// The x86 row-layout dot-product kernels' entries per weight type (kernels/x86/dot_common.h says
// how they are built): compiled into kernels/avx2/dot.cpp and kernels/avx512/dot.cpp.
#pragma once

#include "kernels/x86/dot_kquants.h"
#include "kernels/x86/dot_legacy.h"

namespace specula::simd {
namespace {

// (The float types F32 / F16 / BF16 have tile kernels of their own: x86/float_tiles.inc.)
VecDotFn x86_vec_dot(GGMLType wt) {
    switch (wt) {
        case GGMLType::Q8_0:
            return &vec_dot_groups<SignedLegacy<DecQ8_0>, kLegacyGroupMax>;
        case GGMLType::Q4_0:
            return &vec_dot_groups<SignedLegacy<DecQ4_0>, kLegacyGroupMax>;
        case GGMLType::Q5_0:
            return &vec_dot_groups<SignedLegacy<DecQ5_0>, kLegacyGroupMax>;
        case GGMLType::IQ4_NL:
            return &vec_dot_groups<SignedLegacy<DecIQ4_NL>, kLegacyGroupMax>;
        case GGMLType::MXFP4:
            return &vec_dot_groups<SignedLegacy<DecMXFP4>, kLegacyGroupMax>;
        case GGMLType::Q4_1:
            return &vec_dot_groups<MinLegacy<DecQ4_1>, kLegacyGroupMax>;
        case GGMLType::Q5_1:
            return &vec_dot_groups<MinLegacy<DecQ5_1>, kLegacyGroupMax>;
        case GGMLType::Q2_K:
            return &vec_dot_groups<KQuant<DecQ2_K>, kKQuantGroupMax>;
        case GGMLType::Q3_K:
            return &vec_dot_groups<KQuant<DecQ3_K>, kKQuantGroupMax>;
        case GGMLType::Q4_K:
            return &vec_dot_groups<K4Tokens<DecQ4_K>, kKGroupMax>;
        case GGMLType::Q5_K:
            return &vec_dot_groups<K4Tokens<DecQ5_K>, kKGroupMax>;
        case GGMLType::Q6_K:
            return &vec_dot_groups<Q6KTokens, kKGroupMax>;
        case GGMLType::IQ4_XS:
            return &vec_dot_groups<KQuant<DecIQ4_XS>, kKQuantGroupMax>;
        default:
            return nullptr;
    }
}

VecDotQ8Fn x86_vec_dot_q8(GGMLType wt) {
    switch (wt) {
        case GGMLType::Q8_0:
            return &vec_dot_legacy_f32<SignedLegacy<DecQ8_0>>;
        case GGMLType::Q4_0:
            return &vec_dot_legacy_f32<SignedLegacy<DecQ4_0>>;
        case GGMLType::Q5_0:
            return &vec_dot_legacy_f32<SignedLegacy<DecQ5_0>>;
        case GGMLType::IQ4_NL:
            return &vec_dot_legacy_f32<SignedLegacy<DecIQ4_NL>>;
        case GGMLType::MXFP4:
            return &vec_dot_legacy_f32<SignedLegacy<DecMXFP4>>;
        default:
            return nullptr;
    }
}

}  // namespace
}  // namespace specula::simd
