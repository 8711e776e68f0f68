// Entry points of the scalar reference (kernels/quants.h): checks the type and row length, then
// dispatches to the per-format routines of quants_legacy.cpp, quants_k.cpp and quants_iq.cpp.
// The plain float types (F32, F16, BF16) are handled here.
//
// Float dot products (F32, F16, BF16) multiply in float and accumulate in double, in element
// order, like ggml's generic ggml_vec_dot_f32/f16/bf16.
#include "kernels/quants.h"

#include <cstring>
#include <ostream>

#include "common/error.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/ref/quants_internal.h"

namespace specula {

namespace {

// Streams a type's name, or "#<number>" for a number that names no type.
struct TypeLabel {
    GGMLType t;
};
std::ostream& operator<<(std::ostream& os, TypeLabel l) {
    const auto name = type_name(l.t);
    if (!name.empty()) return os << name;
    return os << '#' << static_cast<uint32_t>(l.t);
}
TypeLabel type_label(GGMLType t) {
    return {t};
}

// Throws unless n is a non-negative multiple of t's block size.
void check_row(const char* what, GGMLType t, int64_t n) {
    const int64_t bs = type_traits(t).block_size;
    if (bs <= 0) fail(what, ": unsupported tensor type ", type_label(t));
    if (n < 0 || n % bs != 0) {
        fail(what, ": row of ", n, " elements is not a multiple of the ", type_label(t),
             " block size ", bs);
    }
}

[[noreturn]] void unsupported(const char* what, GGMLType t) {
    fail(what, ": unsupported tensor type ", type_label(t));
}

void f16_to_f32_row(const fp16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}
void bf16_to_f32_row(const bf16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}
void f32_to_f16_row(const float* x, fp16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
void f32_to_bf16_row(const float* x, bf16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

float vec_dot_f32(int64_t n, const float* x, const float* y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * y[i]);
    return static_cast<float>(sum);
}
float vec_dot_f16(int64_t n, const fp16_t* x, const fp16_t* y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        sum += static_cast<double>(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
    }
    return static_cast<float>(sum);
}
float vec_dot_bf16(int64_t n, const bf16_t* x, const bf16_t* y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        sum += static_cast<double>(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
    }
    return static_cast<float>(sum);
}

}  // namespace

GGMLType vec_dot_type(GGMLType t) {
    switch (t) {
        case GGMLType::F32:
            return GGMLType::F32;
        case GGMLType::F16:
            return GGMLType::F16;
        case GGMLType::BF16:
            return GGMLType::BF16;
        case GGMLType::Q4_0:
        case GGMLType::Q5_0:
        case GGMLType::Q8_0:
        case GGMLType::IQ4_NL:
        case GGMLType::MXFP4:
            return GGMLType::Q8_0;
        case GGMLType::Q4_1:
        case GGMLType::Q5_1:
            return GGMLType::Q8_1;
        case GGMLType::Q2_K:
        case GGMLType::Q3_K:
        case GGMLType::Q4_K:
        case GGMLType::Q5_K:
        case GGMLType::Q6_K:
        case GGMLType::IQ4_XS:
            return GGMLType::Q8_K;
        default:
            unsupported("vec_dot_type", t);
    }
}

void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n) {
    check_row("dequantize_row", t, n);
    switch (t) {
        case GGMLType::F32:
            std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
            return;
        case GGMLType::F16:
            return f16_to_f32_row(static_cast<const fp16_t*>(src), dst, n);
        case GGMLType::BF16:
            return bf16_to_f32_row(static_cast<const bf16_t*>(src), dst, n);
        case GGMLType::Q4_0:
            return ref::dequantize_q4_0(static_cast<const block_q4_0*>(src), dst, n);
        case GGMLType::Q4_1:
            return ref::dequantize_q4_1(static_cast<const block_q4_1*>(src), dst, n);
        case GGMLType::Q5_0:
            return ref::dequantize_q5_0(static_cast<const block_q5_0*>(src), dst, n);
        case GGMLType::Q5_1:
            return ref::dequantize_q5_1(static_cast<const block_q5_1*>(src), dst, n);
        case GGMLType::Q8_0:
            return ref::dequantize_q8_0(static_cast<const block_q8_0*>(src), dst, n);
        case GGMLType::Q8_1:
            return ref::dequantize_q8_1(static_cast<const block_q8_1*>(src), dst, n);
        case GGMLType::Q2_K:
            return ref::dequantize_q2_K(static_cast<const block_q2_K*>(src), dst, n);
        case GGMLType::Q3_K:
            return ref::dequantize_q3_K(static_cast<const block_q3_K*>(src), dst, n);
        case GGMLType::Q4_K:
            return ref::dequantize_q4_K(static_cast<const block_q4_K*>(src), dst, n);
        case GGMLType::Q5_K:
            return ref::dequantize_q5_K(static_cast<const block_q5_K*>(src), dst, n);
        case GGMLType::Q6_K:
            return ref::dequantize_q6_K(static_cast<const block_q6_K*>(src), dst, n);
        case GGMLType::Q8_K:
            return ref::dequantize_q8_K(static_cast<const block_q8_K*>(src), dst, n);
        case GGMLType::IQ4_NL:
            return ref::dequantize_iq4_nl(static_cast<const block_iq4_nl*>(src), dst, n);
        case GGMLType::IQ4_XS:
            return ref::dequantize_iq4_xs(static_cast<const block_iq4_xs*>(src), dst, n);
        case GGMLType::MXFP4:
            return ref::dequantize_mxfp4(static_cast<const block_mxfp4*>(src), dst, n);
        default:
            unsupported("dequantize_row", t);
    }
}

void quantize_row(GGMLType t, const float* src, void* dst, int64_t n) {
    check_row("quantize_row", t, n);
    switch (t) {
        case GGMLType::F32:
            std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
            return;
        case GGMLType::F16:
            return f32_to_f16_row(src, static_cast<fp16_t*>(dst), n);
        case GGMLType::BF16:
            return f32_to_bf16_row(src, static_cast<bf16_t*>(dst), n);
        case GGMLType::Q4_0:
            return ref::quantize_q4_0(src, static_cast<block_q4_0*>(dst), n);
        case GGMLType::Q4_1:
            return ref::quantize_q4_1(src, static_cast<block_q4_1*>(dst), n);
        case GGMLType::Q5_0:
            return ref::quantize_q5_0(src, static_cast<block_q5_0*>(dst), n);
        case GGMLType::Q5_1:
            return ref::quantize_q5_1(src, static_cast<block_q5_1*>(dst), n);
        case GGMLType::Q8_0:
            return ref::quantize_q8_0(src, static_cast<block_q8_0*>(dst), n,
                                      ref::Q8Rounding::Reference);
        case GGMLType::Q8_1:
            return ref::quantize_q8_1(src, static_cast<block_q8_1*>(dst), n,
                                      ref::Q8Rounding::Reference);
        case GGMLType::Q8_K:
            return ref::quantize_q8_K(src, static_cast<block_q8_K*>(dst), n);
        case GGMLType::MXFP4:
            return ref::quantize_mxfp4(src, static_cast<block_mxfp4*>(dst), n);
        default:
            unsupported("quantize_row", t);
    }
}

void quantize_row_ggml_cpu(GGMLType t, const float* src, void* dst, int64_t n) {
    switch (t) {
        case GGMLType::Q8_0:
            check_row("quantize_row_ggml_cpu", t, n);
            return ref::quantize_q8_0(src, static_cast<block_q8_0*>(dst), n,
                                      ref::Q8Rounding::CpuBackend);
        case GGMLType::Q8_1:
            check_row("quantize_row_ggml_cpu", t, n);
            return ref::quantize_q8_1(src, static_cast<block_q8_1*>(dst), n,
                                      ref::Q8Rounding::CpuBackend);
        default:
            return quantize_row(t, src, dst, n);
    }
}

float vec_dot_ref(GGMLType t, int64_t n, const void* w, const void* a) {
    check_row("vec_dot_ref", t, n);
    using namespace ref;
    const auto* q80 = static_cast<const block_q8_0*>(a);
    const auto* q81 = static_cast<const block_q8_1*>(a);
    const auto* q8k = static_cast<const block_q8_K*>(a);
    switch (t) {
        case GGMLType::F32:
            return vec_dot_f32(n, static_cast<const float*>(w), static_cast<const float*>(a));
        case GGMLType::F16:
            return vec_dot_f16(n, static_cast<const fp16_t*>(w), static_cast<const fp16_t*>(a));
        case GGMLType::BF16:
            return vec_dot_bf16(n, static_cast<const bf16_t*>(w), static_cast<const bf16_t*>(a));
        case GGMLType::Q4_0:
            return vec_dot_q4_0_q8_0(n, static_cast<const block_q4_0*>(w), q80);
        case GGMLType::Q4_1:
            return vec_dot_q4_1_q8_1(n, static_cast<const block_q4_1*>(w), q81);
        case GGMLType::Q5_0:
            return vec_dot_q5_0_q8_0(n, static_cast<const block_q5_0*>(w), q80);
        case GGMLType::Q5_1:
            return vec_dot_q5_1_q8_1(n, static_cast<const block_q5_1*>(w), q81);
        case GGMLType::Q8_0:
            return vec_dot_q8_0_q8_0(n, static_cast<const block_q8_0*>(w), q80);
        case GGMLType::Q2_K:
            return vec_dot_q2_K_q8_K(n, static_cast<const block_q2_K*>(w), q8k);
        case GGMLType::Q3_K:
            return vec_dot_q3_K_q8_K(n, static_cast<const block_q3_K*>(w), q8k);
        case GGMLType::Q4_K:
            return vec_dot_q4_K_q8_K(n, static_cast<const block_q4_K*>(w), q8k);
        case GGMLType::Q5_K:
            return vec_dot_q5_K_q8_K(n, static_cast<const block_q5_K*>(w), q8k);
        case GGMLType::Q6_K:
            return vec_dot_q6_K_q8_K(n, static_cast<const block_q6_K*>(w), q8k);
        case GGMLType::IQ4_NL:
            return vec_dot_iq4_nl_q8_0(n, static_cast<const block_iq4_nl*>(w), q80);
        case GGMLType::IQ4_XS:
            return vec_dot_iq4_xs_q8_K(n, static_cast<const block_iq4_xs*>(w), q8k);
        case GGMLType::MXFP4:
            return vec_dot_mxfp4_q8_0(n, static_cast<const block_mxfp4*>(w), q80);
        default:
            unsupported("vec_dot_ref", t);
    }
}

}  // namespace specula
