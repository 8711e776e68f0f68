// The panel layout for F16 / BF16 weights (see repack_float.h): repacking, reading a row back,
// widening the activations and the scalar reference kernels.
#include "kernels/layout/repack_float.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "common/error.h"
#include "kernels/layout/fp16.h"
#include "kernels/policy.h"
#include "kernels/quants.h"
#include "kernels/table.h"

namespace specula {

namespace {

float widen(GGMLType t, uint16_t v) {
    return t == GGMLType::F16 ? fp16_to_fp32(v) : bf16_to_fp32(v);
}

template <GGMLType kType>
void tile_ref(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
              int64_t ldy) {
    const int64_t n = static_cast<int64_t>(a.stride / sizeof(float));
    const auto* w = reinterpret_cast<const uint16_t*>(tile);
    const auto* x = reinterpret_cast<const float*>(a.q);
    for (int t = 0; t < ntok; ++t) {
        for (int r = lo; r < hi; ++r) {
            float tot = 0.0f;
            for (int64_t k0 = 0; k0 < n; k0 += kFloatBlock) {
                float s = 0.0f;
                for (int64_t k = k0; k < std::min(n, k0 + kFloatBlock); ++k) {
                    s = std::fma(widen(kType, w[k * kPackRows + r]), x[k * ntok + t], s);
                }
                tot = tot + s;
            }
            y[t * ldy + (r - lo)] = tot;
        }
    }
}

}  // namespace

bool float_repackable(GGMLType t) {
    return t == GGMLType::F16 || t == GGMLType::BF16;
}

bool float_repack_at_load() {
    return kernel_policy().repack_float;
}

size_t float_tile_bytes(int64_t cols) {
    return static_cast<size_t>(cols) * kPackRows * sizeof(uint16_t);
}

void float_repack(const WeightView& W, uint8_t* dst) {
    if (!float_repackable(W.type) || W.cols <= 0) {
        fail("repack: ", type_name(W.type), " weight with ", W.cols, " columns cannot be packed");
    }
    const int64_t panels = (W.rows + kPackRows - 1) / kPackRows;
    const size_t tb = float_tile_bytes(W.cols);
    for (int64_t p = 0; p < panels; ++p) {
        auto* out = reinterpret_cast<uint16_t*>(dst + p * tb);
        for (int r = 0; r < kPackRows; ++r) {
            const int64_t row = p * kPackRows + r;
            if (row >= W.rows) {
                for (int64_t k = 0; k < W.cols; ++k) out[k * kPackRows + r] = 0;
                continue;
            }
            const auto* src = reinterpret_cast<const uint16_t*>(W.row(row));
            for (int64_t k = 0; k < W.cols; ++k) out[k * kPackRows + r] = src[k];
        }
    }
}

void float_dequantize_packed_row(const WeightView& W, int64_t r, float* out) {
    const auto* w =
        reinterpret_cast<const uint16_t*>(W.packed + (r / kPackRows) * float_tile_bytes(W.cols));
    const int i = static_cast<int>(r % kPackRows);
    for (int64_t k = 0; k < W.cols; ++k) out[k] = widen(W.type, w[k * kPackRows + i]);
}

PackedActs float_prepare_acts(GGMLType wt, const uint8_t* acts, size_t stride, int64_t cols,
                              int ntok, float* out) {
    const GGMLType at = vec_dot_type(wt);
    const Kernel* k = find_kernel(wt, Layout::Packed, TokenClass::Any);
    const WidenFn fn = k ? k->widen : nullptr;  // null: the scalar loop
    for (int c0 = 0; c0 < ntok; c0 += kFloatChunk) {
        const int m = std::min(kFloatChunk, ntok - c0);
        float* dst = out + static_cast<size_t>(c0) * cols;
        for (int t = 0; t < m; ++t) {
            const auto* src = reinterpret_cast<const uint16_t*>(acts + (c0 + t) * stride);
            if (fn) {
                fn(src, cols, dst + t, m);
            } else {
                for (int64_t k = 0; k < cols; ++k) dst[k * m + t] = widen(at, src[k]);
            }
        }
    }
    return {reinterpret_cast<const uint8_t*>(out), static_cast<size_t>(cols) * sizeof(float),
            nullptr, nullptr, 0};
}

void float_tile_ref_f16(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi,
                        float* y, int64_t ldy) {
    tile_ref<GGMLType::F16>(tile, a, ntok, lo, hi, y, ldy);
}

void float_tile_ref_bf16(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi,
                         float* y, int64_t ldy) {
    tile_ref<GGMLType::BF16>(tile, a, ntok, lo, hi, y, ldy);
}

}  // namespace specula
