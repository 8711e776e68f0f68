// AVX2 + AVX-VNNI tile kernels for packed Q4_K / Q6_K weights (kernels/layout/repack_k.h): the
// kernels of kernels/x86/gemm_kquants_256.inc with one VEX vpdpbusd per byte dot product (the same
// bits as the AVX2 build). The AVX2 level uses these when the CPU has AVX-VNNI (the table's AVX2
// chain).
#if !defined(__AVXVNNI__)
#error "avxvnni/gemm_kquants.cpp must be compiled with AVX-VNNI enabled"
#endif

#define SPECULA_KQ256_VNNI 1
#include "kernels/x86/gemm_kquants_256.inc"
