// The kernel table (see table.h): built once from the registration functions of the ISAs the CPU
// runs; the chain of ISAs a lookup walks, from the policy and the CPU.
#include "kernels/table.h"

#include "kernels/cpu.h"
#include "kernels/isa_parts.h"
#include "kernels/policy.h"

namespace specula {

namespace {

int idx(GGMLType t) {
    return static_cast<int>(t);
}
int idx(Isa i) {
    return static_cast<int>(i);
}

KernelTable build() {
    KernelTable t;
    register_scalar(t);
    const CpuFeatures& cpu = cpu_features();
    if (cpu.avx2) register_avx2(t);
    if (cpu.avx512) register_avx512(t);
    if (cpu.avx512) register_amx(t);  // the emulation runs on any AVX-512 CPU
    return t;
}

Isa level_isa(SimdLevel l) {
    return l == SimdLevel::AVX512 ? Isa::AVX512 : l == SimdLevel::AVX2 ? Isa::AVX2 : Isa::Scalar;
}

// The chain without AMX (quantizers and attention have none; the AMX self-test quantizes).
IsaChain base_chain(SimdLevel level) {
    IsaChain c;
    if (level == SimdLevel::AVX512) {
        if (bf16_dot_at_avx512()) c.isa[c.n++] = Isa::AVX512BF16Dot;
        if (kq_mulld_at_avx512()) c.isa[c.n++] = Isa::AVX512Mulld;
        c.isa[c.n++] = Isa::AVX512;
    }
    if (level >= SimdLevel::AVX2) {
        if (level == SimdLevel::AVX2 && cpu_features().avx_vnni) c.isa[c.n++] = Isa::AVXVNNI;
        c.isa[c.n++] = Isa::AVX2;
    }
    c.isa[c.n++] = Isa::Scalar;
    return c;
}

// The AMX kernels in use at `level` under the policy, or Scalar for none.
Isa amx_isa(SimdLevel level) {
    if (level != SimdLevel::AVX512) return Isa::Scalar;
    switch (kernel_policy().amx) {
        case AmxMode::Off:
            return Isa::Scalar;
        case AmxMode::Emulate:
            return Isa::AMXEmulated;
        case AmxMode::Hardware:
            return cpu_has_amx() ? Isa::AMX : Isa::Scalar;
    }
    return Isa::Scalar;
}

}  // namespace

const char* isa_name(Isa i) {
    static const char* const names[] = {"scalar", "avx2",           "avxvnni",
                                        "avx512", "avx512-bf16dot", "avx512-mulld",
                                        "amx",    "amx-emulated"};
    return idx(i) < idx(Isa::kCount) ? names[idx(i)] : "unknown";
}

Kernel& KernelTable::add(GGMLType t, Layout l, Isa isa, TokenClass c) {
    Kernel& k = kernels_[idx(t)][static_cast<int>(l)][idx(isa)][static_cast<int>(c)];
    k.present = true;
    return k;
}

const Kernel* KernelTable::find(GGMLType t, Layout l, Isa isa, TokenClass c) const {
    if (idx(t) >= kTypes) return nullptr;
    const Kernel& k = kernels_[idx(t)][static_cast<int>(l)][idx(isa)][static_cast<int>(c)];
    return k.present ? &k : nullptr;
}

QuantizeRowFn& KernelTable::quantizer(GGMLType act_type, Isa isa) {
    return quantizers_[idx(act_type)][idx(isa)];
}
QuantizeRowFn KernelTable::quantizer(GGMLType act_type, Isa isa) const {
    return idx(act_type) < kTypes ? quantizers_[idx(act_type)][idx(isa)] : nullptr;
}

AttentionEntry& KernelTable::attention(Isa isa) {
    return attention_[idx(isa)];
}
const AttentionEntry& KernelTable::attention(Isa isa) const {
    return attention_[idx(isa)];
}
ActivationEntry& KernelTable::activation(Isa isa) {
    return activation_[idx(isa)];
}
const ActivationEntry& KernelTable::activation(Isa isa) const {
    return activation_[idx(isa)];
}

const KernelTable& kernel_table() {
    static const KernelTable t = build();
    return t;
}

IsaChain isa_chain(SimdLevel level) {
    const IsaChain base = base_chain(level);
    const Isa amx = amx_isa(level);
    if (amx == Isa::Scalar) return base;
    IsaChain c;
    c.isa[c.n++] = amx;
    for (int i = 0; i < base.n; ++i) c.isa[c.n++] = base.isa[i];
    return c;
}

IsaChain active_isa_chain() {
    return isa_chain(active_simd_level());
}

const Kernel* find_kernel(GGMLType t, Layout l, TokenClass c, const IsaChain& chain) {
    const KernelTable& table = kernel_table();
    for (int i = 0; i < chain.n; ++i) {
        if (const Kernel* k = table.find(t, l, chain.isa[i], c)) return k;
    }
    return nullptr;
}

const Kernel* find_kernel(GGMLType t, Layout l, TokenClass c) {
    return find_kernel(t, l, c, active_isa_chain());
}

VecDotFn vec_dot_kernel(GGMLType wt, SimdLevel level) {
    const Kernel* k = kernel_table().find(wt, Layout::Rows, level_isa(level), TokenClass::Any);
    return k ? k->dot : nullptr;
}

VecDotFn best_vec_dot(GGMLType wt) {
    const Kernel* k = find_kernel(wt, Layout::Rows, TokenClass::Any);
    return k ? k->dot : nullptr;
}

QuantizeRowFn best_quantize_row(GGMLType act_type) {
    const IsaChain c = base_chain(active_simd_level());
    for (int i = 0; i < c.n; ++i) {
        if (QuantizeRowFn fn = kernel_table().quantizer(act_type, c.isa[i])) return fn;
    }
    return nullptr;
}

PackedTileFn packed_tile_at(GGMLType t, Isa isa) {
    const Kernel* k = kernel_table().find(t, Layout::Packed, isa, TokenClass::Any);
    return k ? k->tile : nullptr;
}

PackedTileFn best_packed_tile(GGMLType t) {
    const Kernel* k = find_kernel(t, Layout::Packed, TokenClass::Any);
    return k ? k->tile : nullptr;
}

PackedPairFn best_packed_pair(GGMLType t) {
    if (!kernel_policy().packed_pair) return nullptr;
    const Kernel* k = find_kernel(t, Layout::Packed, TokenClass::Many);
    return k ? k->pair : nullptr;
}

AttentionEntry best_attention() {
    const IsaChain c = base_chain(active_simd_level());
    AttentionEntry e;
    for (int i = c.n - 1; i >= 0; --i) {  // the best ISA's members last, over the others
        const AttentionEntry& a = kernel_table().attention(c.isa[i]);
        if (a.dot) e.dot = a.dot;
        if (a.axpy) e.axpy = a.axpy;
        if (a.blocked) e.blocked = a.blocked;
        if (a.fp16_to_f32) e.fp16_to_f32 = a.fp16_to_f32;
        if (a.i8_scale_to_f32) e.i8_scale_to_f32 = a.i8_scale_to_f32;
    }
    return e;
}

bool best_blocked_attention(int head_dim, BlockAttentionKernels* k) {
    const IsaChain c = base_chain(active_simd_level());
    for (int i = 0; i < c.n; ++i) {
        const auto blocked = kernel_table().attention(c.isa[i]).blocked;
        if (blocked && blocked(head_dim, k)) return true;
    }
    return false;
}

ActivationEntry best_activation() {
    const IsaChain c = base_chain(active_simd_level());
    ActivationEntry e;
    for (int i = c.n - 1; i >= 0; --i) {  // the best ISA's members last, over the others
        const ActivationEntry& a = kernel_table().activation(c.isa[i]);
        if (a.silu_mul) e.silu_mul = a.silu_mul;
        if (a.gelu_mul) e.gelu_mul = a.gelu_mul;
        if (a.swiglu_oai) e.swiglu_oai = a.swiglu_oai;
    }
    return e;
}

bool cpu_has_amx() {
    // The table first: the self-test's kernels hand short passes to the registered VNNI ones.
    static const bool ok = cpu_features().amx && (kernel_table(), amx::grant_and_self_test());
    return ok;
}

bool amx_active() {
    return amx_isa(active_simd_level()) != Isa::Scalar;
}

}  // namespace specula
