// AVX-512 build (F/BW/VL/DQ/VNNI/BF16) of the x86 dot-product kernels (kernels/x86/dot_rows.h):
// the same kernels as the AVX2 build with VNNI byte dot products and 32 vector registers, giving
// bit-identical results, except Q4_K / Q5_K / Q6_K, which get 512-bit kernels (one row, and two
// rows at once for matmul: dot_kquants512.h) that give the same bits again. The
// float types (F32, F16, BF16) have their own 512-bit tile kernels instead (dot_float.cpp),
// which differ from the AVX2 level by summation order. The table registers them only
// where the CPU probe found every one of those features.
#include "kernels/avx512/dot_kquants512.h"
#include "kernels/isa_parts.h"
#include "kernels/x86/dot_rows.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__)
#error "avx512/dot.cpp must be compiled with AVX-512 VL and VNNI enabled"
#endif

namespace specula::avx512 {

namespace {

// Tokens from which the row-pair kernels beat the one-row kernel: below, one row stream decodes
// at the memory's pace already and two streams only add prefetch misses (measured with
// bench_kernels, Q4_K / Q6_K at 1, 2, 4, 9 tokens).
constexpr int kRows2MinTokens = 3;

}  // namespace

void add_dot(KernelTable& t) {
    for (int i = 0; i < static_cast<int>(GGMLType::COUNT); ++i) {
        const auto wt = static_cast<GGMLType>(i);
        VecDotFn f = simd::x86_vec_dot_512(wt);
        if (!f) f = simd::x86_vec_dot(wt);
        if (!f) continue;
        Kernel& k = t.add(wt, Layout::Rows, Isa::AVX512, TokenClass::Any);
        k.dot = f;
        k.dot_q8 = simd::x86_vec_dot_q8(wt);
        if (VecDotRows2Fn two = simd::x86_vec_dot_rows2(wt)) {
            Kernel& m = t.add(wt, Layout::Rows, Isa::AVX512, TokenClass::Many);
            m.rows2 = two;
            m.min_tokens = kRows2MinTokens;
        }
    }
}

}  // namespace specula::avx512
