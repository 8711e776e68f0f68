// The panel layout for F16 / BF16 weights (see repack_float.h): repacking, reading a row back,
// widening the activations, the scalar reference kernels and the per-level choice.
#include "kernels/repack_float.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/error.h"
#include "kernels/dot_kernels.h"
#include "kernels/fp16.h"
#include "kernels/quants.h"

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
    const char* e = std::getenv("SPECULA_REPACK_FLOAT");
    return !e || std::string_view(e) != "0";
}

bool bf16_dot_at_avx512() {
    const char* e = std::getenv("SPECULA_BF16_DOT");
    if (e && *e) return std::string_view(e) != "0";
        // Measured on one core, register operands, 16 independent chains: Zen 5 runs vdpbf16ps at
        // the rate of vfmadd231ps (7.7 against 7.2 G/s), twice the multiply-adds; an Emerald Rapids
        // Xeon at a quarter of it (1.25 against 5.2 G/s), so there the FMA panels are 1.7x faster
        // (bench_kernels, 1024 x 2048 BF16 hot, one core: 512 tokens 17.2 against 29.1 ms, 9 tokens
        // 0.34 against 0.54 ms).
#if (defined(__x86_64__) || defined(__i386__)) && !defined(SPECULA_NO_CPU_PROBE)
    static const bool amd = [] {
        __builtin_cpu_init();
        return __builtin_cpu_is("amd") != 0;
    }();
    return amd;
#else
    return false;
#endif
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
    const SimdLevel level = active_simd_level();
    const simd::WidenFn fn = level == SimdLevel::AVX512 ? simd::avx512_float_widen(at)
                             : level == SimdLevel::AVX2 ? simd::avx2_float_widen(at)
                                                        : nullptr;
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

PackedTileFn float_packed_tile_kernel(GGMLType t, SimdLevel level) {
    if (!float_repackable(t)) return nullptr;
    switch (level) {
        case SimdLevel::AVX512:
            return simd::avx512_float_packed_tile(t);
        case SimdLevel::AVX2:
            return simd::avx2_float_packed_tile(t);
        default:
            return t == GGMLType::F16 ? &float_tile_ref_f16 : &float_tile_ref_bf16;
    }
}

PackedTileFn best_float_packed_tile(GGMLType t) {
    return float_packed_tile_kernel(t, active_simd_level());
}

}  // namespace specula
