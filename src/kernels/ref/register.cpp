// The scalar ISA's registration: the reference dot product (kernels/quants.h) one token at a time
// (trivially batch invariant), the reference quantizers, and the packed layouts' reference tile
// kernels (kernels/repack.h, kernels/layout/). Every supported weight type has its entries here.
#include "kernels/layout/repack_float.h"
#include "kernels/layout/repack_k.h"
#include "kernels/quants.h"
#include "kernels/repack.h"
#include "kernels/table.h"

namespace specula {

namespace {

template <GGMLType T>
void scalar_vec_dot(int64_t n, const void* w, const void* a, size_t a_stride, int ntok,
                    float* out) {
    const auto* ab = static_cast<const uint8_t*>(a);
    for (int t = 0; t < ntok; ++t) out[t] = vec_dot_ref(T, n, w, ab + t * a_stride);
}

template <GGMLType T>
void scalar_quantize(const float* x, void* dst, int64_t n) {
    quantize_row_ggml_cpu(T, x, dst, n);
}

template <GGMLType... Ts>
void add_dots(KernelTable& t) {
    ((t.add(Ts, Layout::Rows, Isa::Scalar, TokenClass::Any).dot = &scalar_vec_dot<Ts>), ...);
}

template <GGMLType... Ts>
void add_quantizers(KernelTable& t) {
    ((t.quantizer(Ts, Isa::Scalar) = &scalar_quantize<Ts>), ...);
}

void add_packed(KernelTable& t, GGMLType type, PackedTileFn tile) {
    t.add(type, Layout::Packed, Isa::Scalar, TokenClass::Any).tile = tile;
}

}  // namespace

void register_scalar(KernelTable& t) {
    using enum GGMLType;
    add_dots<F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
             IQ4_XS, MXFP4>(t);
    add_quantizers<Q8_0, Q8_1, Q8_K, F16, BF16, F32>(t);
    add_packed(t, Q8_0, &packed_tile_ref);
    add_packed(t, Q4_K, &kq_tile_ref_q4_K);
    add_packed(t, Q6_K, &kq_tile_ref_q6_K);
    add_packed(t, F16, &float_tile_ref_f16);
    add_packed(t, BF16, &float_tile_ref_bf16);
}

}  // namespace specula
