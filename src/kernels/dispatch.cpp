// Run-time kernel choice. The CPU's level is probed once; SPECULA_SIMD is read on every call so
// that a test can lower the level between calls. The scalar level wraps the reference dot
// product (kernels/quants.h), one token at a time, which is trivially batch invariant.
#include "kernels/dispatch.h"

#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "kernels/amx.h"
#include "kernels/dot_kernels.h"
#include "kernels/packed_kernels.h"
#include "kernels/quants.h"

namespace specula {

namespace {

SimdLevel probe_cpu() {
#if (defined(__x86_64__) || defined(__i386__)) && !defined(SPECULA_NO_CPU_PROBE)  // fuzz: clang 14
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    const bool avx512 =
        avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16");
    if (avx512) return SimdLevel::AVX512;
    if (avx2) return SimdLevel::AVX2;
#endif
    return SimdLevel::Scalar;
}

// The cap SPECULA_SIMD asks for; an unknown value is an error rather than silently ignored.
SimdLevel env_cap() {
    const char* v = std::getenv("SPECULA_SIMD");
    if (!v || !*v) return SimdLevel::AVX512;
    if (std::strcmp(v, "scalar") == 0) return SimdLevel::Scalar;
    if (std::strcmp(v, "avx2") == 0) return SimdLevel::AVX2;
    if (std::strcmp(v, "avx512") == 0) return SimdLevel::AVX512;
    if (std::strcmp(v, "amx") == 0) return SimdLevel::AVX512;  // AVX-512 with AMX (kernels/amx.h)
    fail("SPECULA_SIMD=", v, ": expected scalar, avx2, avx512 or amx");
}

template <GGMLType T>
void scalar_vec_dot(int64_t n, const void* w, const void* a, size_t a_stride, int ntok,
                    float* out) {
    const auto* ab = static_cast<const uint8_t*>(a);
    for (int t = 0; t < ntok; ++t) out[t] = vec_dot_ref(T, n, w, ab + t * a_stride);
}

VecDotFn scalar_kernel(GGMLType wt) {
    switch (wt) {
#define SPECULA_SCALAR_CASE(T) \
    case GGMLType::T:          \
        return &scalar_vec_dot<GGMLType::T>;
        SPECULA_SCALAR_CASE(F32)
        SPECULA_SCALAR_CASE(F16)
        SPECULA_SCALAR_CASE(BF16)
        SPECULA_SCALAR_CASE(Q4_0)
        SPECULA_SCALAR_CASE(Q4_1)
        SPECULA_SCALAR_CASE(Q5_0)
        SPECULA_SCALAR_CASE(Q5_1)
        SPECULA_SCALAR_CASE(Q8_0)
        SPECULA_SCALAR_CASE(Q2_K)
        SPECULA_SCALAR_CASE(Q3_K)
        SPECULA_SCALAR_CASE(Q4_K)
        SPECULA_SCALAR_CASE(Q5_K)
        SPECULA_SCALAR_CASE(Q6_K)
        SPECULA_SCALAR_CASE(IQ4_NL)
        SPECULA_SCALAR_CASE(IQ4_XS)
#undef SPECULA_SCALAR_CASE
        default:
            return nullptr;
    }
}

template <GGMLType T>
void scalar_quantize(const float* x, void* dst, int64_t n) {
    quantize_row_ggml_cpu(T, x, dst, n);
}

QuantizeRowFn scalar_quantizer(GGMLType at) {
    switch (at) {
        case GGMLType::Q8_0:
            return &scalar_quantize<GGMLType::Q8_0>;
        case GGMLType::Q8_1:
            return &scalar_quantize<GGMLType::Q8_1>;
        case GGMLType::Q8_K:
            return &scalar_quantize<GGMLType::Q8_K>;
        case GGMLType::F16:
            return &scalar_quantize<GGMLType::F16>;
        case GGMLType::BF16:
            return &scalar_quantize<GGMLType::BF16>;
        case GGMLType::F32:
            return &scalar_quantize<GGMLType::F32>;
        default:
            return nullptr;
    }
}

}  // namespace

SimdLevel cpu_simd_level() {
    static const SimdLevel level = probe_cpu();
    return level;
}

SimdLevel active_simd_level() {
    const SimdLevel cpu = cpu_simd_level(), cap = env_cap();
    return static_cast<int>(cap) < static_cast<int>(cpu) ? cap : cpu;
}

const char* simd_level_name(SimdLevel l) {
    switch (l) {
        case SimdLevel::Scalar:
            return "scalar";
        case SimdLevel::AVX2:
            return "avx2";
        case SimdLevel::AVX512:
            return "avx512";
    }
    return "unknown";
}

VecDotFn vec_dot_kernel(GGMLType wt, SimdLevel level) {
    switch (level) {
        case SimdLevel::Scalar:
            return scalar_kernel(wt);
        case SimdLevel::AVX2:
            return simd::avx2_vec_dot(wt);
        case SimdLevel::AVX512:
            return simd::avx512_vec_dot(wt);
    }
    return nullptr;
}

VecDotFn best_vec_dot(GGMLType wt) {
    for (int l = static_cast<int>(active_simd_level()); l >= 0; --l) {
        if (VecDotFn fn = vec_dot_kernel(wt, static_cast<SimdLevel>(l))) return fn;
    }
    return nullptr;
}

QuantizeRowFn best_quantize_row(GGMLType act_type) {
    if (active_simd_level() >= SimdLevel::AVX2) {
        if (QuantizeRowFn fn = simd::avx2_quantize_row(act_type)) return fn;
    }
    return scalar_quantizer(act_type);
}

PackedTileFn packed_tile_kernel(SimdLevel level) {
    switch (level) {
        case SimdLevel::Scalar:
            return &packed_tile_ref;
        case SimdLevel::AVX2:
            return simd::avx2_packed_tile();
        case SimdLevel::AVX512:
            return simd::avx512_packed_tile();
    }
    return nullptr;
}

PackedTileFn best_packed_tile() {
    if (PackedTileFn amx = best_amx_packed_tile(GGMLType::Q8_0)) return amx;
    return packed_tile_kernel(active_simd_level());
}

PackedPairFn packed_pair_kernel(GGMLType t, SimdLevel level) {
    return level == SimdLevel::AVX512 && t == GGMLType::Q8_0 ? simd::avx512_packed_pair() : nullptr;
}

PackedPairFn best_packed_pair(GGMLType t) {
    static const bool off = [] {
        const char* e = std::getenv("SPECULA_PACKED_PAIR");
        return e && std::strcmp(e, "0") == 0;
    }();
    // With AMX the tile kernel takes prompt-sized passes itself.
    return off || amx_active() ? nullptr : packed_pair_kernel(t, active_simd_level());
}

}  // namespace specula
