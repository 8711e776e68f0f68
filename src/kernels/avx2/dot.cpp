// AVX2 + FMA + F16C build of the x86 row-layout dot-product kernels (kernels/x86/dot_rows.h) for
// the quantized types; the float types have the tile kernels of dot_float.cpp.
#include "kernels/isa_parts.h"
#include "kernels/x86/dot_rows.h"

namespace specula::avx2 {

void add_dot(KernelTable& t) {
    for (int i = 0; i < static_cast<int>(GGMLType::COUNT); ++i) {
        const auto wt = static_cast<GGMLType>(i);
        if (VecDotFn f = simd::x86_vec_dot(wt)) {
            Kernel& k = t.add(wt, Layout::Rows, Isa::AVX2, TokenClass::Any);
            k.dot = f;
            k.dot_q8 = simd::x86_vec_dot_q8(wt);
        }
    }
}

}  // namespace specula::avx2
