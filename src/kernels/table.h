// The kernel table: ONE map from (weight type, layout, ISA, token-count class) to the kernels that
// compute a matrix product, plus the per-ISA activation quantizers, attention loops and KV row
// conversions. Each ISA fills its part with one registration function (register_scalar in
// kernels/ref/register.cpp, register_avx2 and register_avx512 in kernels/<isa>/register.cpp,
// register_amx in kernels/amx/gemm_amx.cpp), called once per
// process for the ISAs the CPU probe (kernels/cpu.h) found, so nothing compiled for an ISA runs
// without it. The policy (kernels/policy.h) and the CPU give the chain of ISAs a lookup walks,
// best first; the first ISA with an entry for the key answers (a weight kernel entry is whole:
// an ISA that registers one registers every kernel of it).
//
//   AVX-512 chain: [AMX | AMX emulated] [AVX-512 vdpbf16ps for BF16] [AVX-512 vpmulld K-quants]
//                  AVX-512, AVX2, scalar
//   AVX2 chain:    [AVX-VNNI] AVX2, scalar
//
// The bits each ISA gives are the README's (its Kernels section): the packed layouts give the
// scalar reference's bits at every ISA (but BF16 on vdpbf16ps), the quantized row kernels the
// same bits at AVX2 and AVX-512, and the rest agree within rounding; every kernel is batch
// invariant.
//
// How ISA code is written (the one pattern): each kernels/<isa>/ folder is compiled with that
// ISA's flags, and its code runs only after the probe found the ISA. Code shared by several ISAs
// lives in kernels/x86/ and has internal linkage, so the copies built with different flags never
// meet at link time (and it calls no inline function of a shared header, which the linker could
// otherwise take from a wider ISA's copy for a scalar caller):
//   - x86/*.h: templates and inline functions in `namespace specula::simd { namespace {`, included
//     by the ISA translation units (dot_rows.h, token_groups.h, hsum.h, ...);
//   - x86/*.inc, only where a body is written over a type or primitive that the including file
//     defines for its ISA (the vector traits V of float_tiles.inc, float_panels.inc and
//     attention_blocked.inc; dpbusd256 of gemm_kquants_256.inc): included inside the including
//     file's `namespace specula::simd { namespace {`, after those definitions.
// A translation unit then adds its kernels to the table in its ISA's part (kernels/isa_parts.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_types.h"
#include "kernels/kernel_types.h"
#include "kernels/simd_level.h"

namespace specula {

enum class Isa : uint8_t {
    Scalar,
    AVX2,
    AVXVNNI,  // AVX2 + AVX-VNNI: the AVX2 level's packed K-quant tiles where the CPU has it
    AVX512,
    AVX512BF16Dot,  // AVX-512 BF16 panels on vdpbf16ps (the policy's bf16_dot)
    AVX512Mulld,    // AVX-512 packed Q4_K / Q6_K tiles scaled by vpmulld (the policy's kq_mulld)
    AMX,
    AMXEmulated,  // the AMX kernels over a scalar emulation of the tile instructions
    kCount,
};
const char* isa_name(Isa i);

enum class Layout : uint8_t { Rows, Packed };  // GGUF rows, or repacked (kernels/repack.h)

// Any: a kernel for any token count. Many: a kernel for two rows (or two packed tiles) at once
// that pays only from Kernel::min_tokens tokens up; it gives the bits of the Any kernel.
enum class TokenClass : uint8_t { Any, Many };

// What one key maps to (the members its layout and class use).
struct Kernel {
    bool present = false;
    // Rows, Any:
    VecDotFn dot = nullptr;
    VecDotQ8Fn dot_q8 = nullptr;  // the same with float act scales (Q8_0 activations)
    FloatRowsFn rows = nullptr;   // F32 / F16 / BF16: rows x tokens register tiles
    // Rows, Many:
    VecDotRows2Fn rows2 = nullptr;
    // Packed, Any:
    PackedTileFn tile = nullptr;
    WidenFn widen = nullptr;  // F16 / BF16 panels: the activations' widening (null: scalar)
    // Packed, Many:
    PackedPairFn pair = nullptr;
    int min_tokens = 1;  // Many: used for passes of at least this many tokens
};

// Attention's inner loops (kernels/attention.h) at one ISA.
struct AttentionEntry {
    float (*dot)(const float* x, const float* y, int64_t n) = nullptr;
    void (*axpy)(float a, const float* x, float* y, int64_t n) = nullptr;
    bool (*blocked)(int head_dim, BlockAttentionKernels* k) = nullptr;
    // KV cache rows as floats (exact): F16, and d * q for int8 q (Q8_0).
    void (*fp16_to_f32)(const uint16_t* x, float* out, int n) = nullptr;
    void (*i8_scale_to_f32)(const int8_t* q, float d, float* out, int n) = nullptr;
};

// The FFN's elementwise activations at one ISA (kernels/x86/activations.h). The scalar level
// has none: kernels/ops.cpp's libm loops are the reference and the fallback.
struct ActivationEntry {
    void (*silu_mul)(float* g, const float* u, int64_t n) = nullptr;    // g = silu(g) * u
    void (*gelu_mul)(float* g, const float* u, int64_t n) = nullptr;    // g = gelu(g) * u
    void (*swiglu_oai)(float* g, const float* u, int64_t n) = nullptr;  // gpt-oss's SwiGLU
};

class KernelTable {
  public:
    // The entry to fill (registration) or read; marks it present.
    Kernel& add(GGMLType t, Layout l, Isa isa, TokenClass c);
    const Kernel* find(GGMLType t, Layout l, Isa isa, TokenClass c) const;  // null if absent
    QuantizeRowFn& quantizer(GGMLType act_type, Isa isa);
    QuantizeRowFn quantizer(GGMLType act_type, Isa isa) const;
    AttentionEntry& attention(Isa isa);
    const AttentionEntry& attention(Isa isa) const;
    ActivationEntry& activation(Isa isa);
    const ActivationEntry& activation(Isa isa) const;

  private:
    static constexpr int kTypes = static_cast<int>(GGMLType::COUNT);
    static constexpr int kIsas = static_cast<int>(Isa::kCount);
    Kernel kernels_[kTypes][2][kIsas][2] = {};
    QuantizeRowFn quantizers_[kTypes][kIsas] = {};
    AttentionEntry attention_[kIsas] = {};
    ActivationEntry activation_[kIsas] = {};
};

// The registration functions, one per ISA (kernels/<isa>/register.cpp).
void register_scalar(KernelTable& t);
void register_avx2(KernelTable& t);
void register_avx512(KernelTable& t);
void register_amx(KernelTable& t);  // the hardware and the emulated kernels (AVX-512 code both)

// The table of this process (every ISA the CPU runs registered).
const KernelTable& kernel_table();

// The ISAs a lookup walks, best first.
struct IsaChain {
    Isa isa[8];
    int n = 0;
};
// For a level as the CPU and the policy refine it (AVX-VNNI, vdpbf16ps, vpmulld, AMX as above).
IsaChain isa_chain(SimdLevel level);
IsaChain active_isa_chain();  // isa_chain(active_simd_level())

// The first entry of the chain for the key, or null.
const Kernel* find_kernel(GGMLType t, Layout l, TokenClass c, const IsaChain& chain);
const Kernel* find_kernel(GGMLType t, Layout l, TokenClass c);  // active chain

// Lookups matmul and the tests use.
VecDotFn vec_dot_kernel(GGMLType wt, SimdLevel level);  // at exactly `level` (no fallback)
VecDotFn best_vec_dot(GGMLType wt);
QuantizeRowFn best_quantize_row(GGMLType act_type);  // F32 / F16 / BF16 / Q8_0 / Q8_1 / Q8_K
// The tile kernel for packed weights of type t at exactly `isa`, or null.
PackedTileFn packed_tile_at(GGMLType t, Isa isa);
PackedTileFn best_packed_tile(GGMLType t);
// The pair kernel matmul uses now (null: none, or the policy turned it off).
PackedPairFn best_packed_pair(GGMLType t);
// Attention's loops now: each member from the first ISA of the chain that has it.
AttentionEntry best_attention();
// The blocked attention kernels for heads of head_dim values: the first ISA of the chain whose
// `blocked` covers that size (AVX2's 8-lane kernels for heads of 8, 24, 40 ... on an AVX-512
// machine); false when none does. One choice per size and process, so results stay batch
// invariant.
bool best_blocked_attention(int head_dim, BlockAttentionKernels* k);
// The activations now: each member from the first ISA of the chain that has it (null: none).
ActivationEntry best_activation();

// AMX (kernels/amx/): whether the CPU has it and grants this process the tiles and the kernels
// passed their self-test (once; a failure prints one warning), and whether matmul uses an AMX
// kernel (hardware or emulated) under the policy now.
bool cpu_has_amx();
bool amx_active();

}  // namespace specula
