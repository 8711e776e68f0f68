// AVX2 tile kernels for packed Q4_K / Q6_K weights (kernels/layout/repack_k.h): the kernels of
// kernels/x86/gemm_kquants_256.inc with vpmaddubsw + vpmaddwd byte dot products.
#include "kernels/x86/gemm_kquants_256.inc"
