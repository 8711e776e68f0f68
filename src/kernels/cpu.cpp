// The CPU probe (see cpu.h): CPUID leaves 0, 1, 7.0 and 7.1, and XCR0 for the register state the
// OS saves.
#include "kernels/cpu.h"

#if (defined(__x86_64__) || defined(__i386__)) && !defined(SPECULA_NO_CPU_PROBE)
#include <cpuid.h>

#include <cstring>
#define SPECULA_CPU_PROBE 1
#endif

namespace specula {

namespace {

#ifdef SPECULA_CPU_PROBE
bool bit(unsigned v, int b) {
    return ((v >> b) & 1u) != 0;
}

CpuFeatures probe() {
    CpuFeatures f;
    unsigned a = 0, b = 0, c = 0, d = 0;
    const unsigned max_leaf = __get_cpuid_max(0, nullptr);
    if (max_leaf < 7) return f;
    __cpuid(0, a, b, c, d);
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4), std::memcpy(vendor + 4, &d, 4), std::memcpy(vendor + 8, &c, 4);
    f.amd = std::strcmp(vendor, "AuthenticAMD") == 0;
    __cpuid(1, a, b, c, d);
    const bool fma = bit(c, 12), osxsave = bit(c, 27), avx = bit(c, 28), f16c = bit(c, 29);
    if (!osxsave || !avx) return f;
    unsigned xlo = 0, xhi = 0;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    const bool ymm_state = (xlo & 0x6u) == 0x6u;    // SSE and AVX state
    const bool zmm_state = (xlo & 0xE0u) == 0xE0u;  // opmask, ZMM0-15 high halves, ZMM16-31
    const bool tile_state = (xlo & (3u << 17)) == (3u << 17);  // XTILECFG, XTILEDATA
    __cpuid_count(7, 0, a, b, c, d);
    const bool avx2 = bit(b, 5), avx512f = bit(b, 16), avx512dq = bit(b, 17), avx512bw = bit(b, 30),
               avx512vl = bit(b, 31), avx512vbmi = bit(c, 1), avx512vnni = bit(c, 11),
               amx_tile = bit(d, 24), amx_int8 = bit(d, 25);
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    const bool avx_vnni = bit(a1, 4), avx512bf16 = bit(a1, 5);
    f.avx2 = ymm_state && avx2 && fma && f16c;
    f.avx512 = f.avx2 && zmm_state && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni &&
               avx512bf16;
    f.avx_vnni = f.avx2 && avx_vnni;
    f.avx512vbmi = f.avx512 && avx512vbmi;
    f.amx = f.avx512vbmi && tile_state && amx_tile && amx_int8;
    return f;
}
#else
CpuFeatures probe() {
    return {};
}
#endif

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures f = probe();
    return f;
}

}  // namespace specula
