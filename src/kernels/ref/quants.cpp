// Entry points of the scalar reference (kernels/quants.h): checks the type and row length, then
// calls the type's row of kRefTypes, one table indexed by GGML type whose rows name the
// per-format routines of quants_legacy.cpp, quants_k.cpp, quants_iq.cpp and quants_mxfp4.cpp.
// The plain float types (F32, F16, BF16) are written here. A type without a row (or a routine
// missing from its row) is unsupported by that entry point.
//
// Float dot products (F32, F16, BF16) multiply in float and accumulate in double, in element
// order, like ggml's generic ggml_vec_dot_f32/f16/bf16.
#include "kernels/quants.h"

#include <array>
#include <cstring>
#include <ostream>
#include <tuple>

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

void copy_f32(const float* x, float* y, int64_t n) {
    std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}

// Typed routines as the rows' untyped pointers: the block types come from F's own parameters.
template <class F>
struct Params;
template <class R, class... A>
struct Params<R (*)(A...)> {
    using type = std::tuple<A...>;
};
template <auto F, size_t I>
using param_t = std::tuple_element_t<I, typename Params<decltype(F)>::type>;

template <auto F>
void dequantize(const void* src, float* dst, int64_t n) {
    F(static_cast<param_t<F, 0>>(src), dst, n);
}
template <auto F>
void quantize(const float* src, void* dst, int64_t n) {
    F(src, static_cast<param_t<F, 1>>(dst), n);
}
template <auto F>
float dot(int64_t n, const void* w, const void* a) {
    return F(n, static_cast<param_t<F, 1>>(w), static_cast<param_t<F, 2>>(a));
}
// The activation quantizers with ggml's reference rounding or ggml-cpu's (quants.h).
template <auto F, ref::Q8Rounding R>
void quantize_q8(const float* src, void* dst, int64_t n) {
    F(src, static_cast<param_t<F, 1>>(dst), n, R);
}

// One type's reference routines; null where the type has none.
struct RefType {
    GGMLType dot_type = GGMLType::COUNT;  // what vec_dot's activation row is quantized to
    void (*dequantize)(const void* src, float* dst, int64_t n) = nullptr;
    void (*quantize)(const float* src, void* dst, int64_t n) = nullptr;
    // ggml-cpu's activation rounding where it differs from quantize's (null: the same).
    void (*quantize_cpu)(const float* src, void* dst, int64_t n) = nullptr;
    float (*vec_dot)(int64_t n, const void* w, const void* a) = nullptr;
};

constexpr auto kRefTypes = [] {
    using namespace ref;
    using R = Q8Rounding;
    using T = GGMLType;
    std::array<RefType, size_t(T::COUNT)> t{};
    const auto set = [&](T type, RefType row) { t[size_t(type)] = row; };
    set(T::F32, {T::F32, dequantize<copy_f32>, quantize<copy_f32>, nullptr, dot<vec_dot_f32>});
    set(T::F16,
        {T::F16, dequantize<f16_to_f32_row>, quantize<f32_to_f16_row>, nullptr, dot<vec_dot_f16>});
    set(T::BF16, {T::BF16, dequantize<bf16_to_f32_row>, quantize<f32_to_bf16_row>, nullptr,
                  dot<vec_dot_bf16>});
    set(T::Q4_0, {T::Q8_0, dequantize<dequantize_q4_0>, quantize<quantize_q4_0>, nullptr,
                  dot<vec_dot_q4_0_q8_0>});
    set(T::Q4_1, {T::Q8_1, dequantize<dequantize_q4_1>, quantize<quantize_q4_1>, nullptr,
                  dot<vec_dot_q4_1_q8_1>});
    set(T::Q5_0, {T::Q8_0, dequantize<dequantize_q5_0>, quantize<quantize_q5_0>, nullptr,
                  dot<vec_dot_q5_0_q8_0>});
    set(T::Q5_1, {T::Q8_1, dequantize<dequantize_q5_1>, quantize<quantize_q5_1>, nullptr,
                  dot<vec_dot_q5_1_q8_1>});
    set(T::Q8_0, {T::Q8_0, dequantize<dequantize_q8_0>, quantize_q8<quantize_q8_0, R::Reference>,
                  quantize_q8<quantize_q8_0, R::CpuBackend>, dot<vec_dot_q8_0_q8_0>});
    set(T::Q8_1, {T::COUNT, dequantize<dequantize_q8_1>, quantize_q8<quantize_q8_1, R::Reference>,
                  quantize_q8<quantize_q8_1, R::CpuBackend>, nullptr});
    set(T::Q2_K, {T::Q8_K, dequantize<dequantize_q2_K>, nullptr, nullptr, dot<vec_dot_q2_K_q8_K>});
    set(T::Q3_K, {T::Q8_K, dequantize<dequantize_q3_K>, nullptr, nullptr, dot<vec_dot_q3_K_q8_K>});
    set(T::Q4_K, {T::Q8_K, dequantize<dequantize_q4_K>, nullptr, nullptr, dot<vec_dot_q4_K_q8_K>});
    set(T::Q5_K, {T::Q8_K, dequantize<dequantize_q5_K>, nullptr, nullptr, dot<vec_dot_q5_K_q8_K>});
    set(T::Q6_K, {T::Q8_K, dequantize<dequantize_q6_K>, nullptr, nullptr, dot<vec_dot_q6_K_q8_K>});
    set(T::Q8_K,
        {T::COUNT, dequantize<dequantize_q8_K>, quantize<quantize_q8_K>, nullptr, nullptr});
    set(T::IQ4_NL,
        {T::Q8_0, dequantize<dequantize_iq4_nl>, nullptr, nullptr, dot<vec_dot_iq4_nl_q8_0>});
    set(T::IQ4_XS,
        {T::Q8_K, dequantize<dequantize_iq4_xs>, nullptr, nullptr, dot<vec_dot_iq4_xs_q8_K>});
    set(T::MXFP4, {T::Q8_0, dequantize<dequantize_mxfp4>, quantize<quantize_mxfp4>, nullptr,
                   dot<vec_dot_mxfp4_q8_0>});
    return t;
}();

// The type's row; an empty one for a number that names no type.
const RefType& ref_type(GGMLType t) {
    static constexpr RefType kNone{};
    return size_t(t) < kRefTypes.size() ? kRefTypes[size_t(t)] : kNone;
}

}  // namespace

GGMLType vec_dot_type(GGMLType t) {
    const RefType& r = ref_type(t);
    if (!r.vec_dot) unsupported("vec_dot_type", t);
    return r.dot_type;
}

void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n) {
    check_row("dequantize_row", t, n);
    const RefType& r = ref_type(t);
    if (!r.dequantize) unsupported("dequantize_row", t);
    r.dequantize(src, dst, n);
}

void quantize_row(GGMLType t, const float* src, void* dst, int64_t n) {
    check_row("quantize_row", t, n);
    const RefType& r = ref_type(t);
    if (!r.quantize) unsupported("quantize_row", t);
    r.quantize(src, dst, n);
}

void quantize_row_ggml_cpu(GGMLType t, const float* src, void* dst, int64_t n) {
    const RefType& r = ref_type(t);
    if (!r.quantize_cpu) return quantize_row(t, src, dst, n);
    check_row("quantize_row_ggml_cpu", t, n);
    r.quantize_cpu(src, dst, n);
}

float vec_dot_ref(GGMLType t, int64_t n, const void* w, const void* a) {
    check_row("vec_dot_ref", t, n);
    const RefType& r = ref_type(t);
    if (!r.vec_dot) unsupported("vec_dot_ref", t);
    return r.vec_dot(n, w, a);
}

}  // namespace specula
