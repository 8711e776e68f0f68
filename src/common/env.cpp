// The environment: see env.h. The only getenv in the program.
#include "common/env.h"

#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace specula {

std::optional<std::string> env_value(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

namespace {

// A switch that is on unless set to "0".
bool on_unless_zero(const char* name) {
    const auto v = env_value(name);
    return !v || *v != "0";
}

std::string one_of(const char* name, std::initializer_list<const char*> allowed) {
    const auto v = env_value(name);
    if (!v) return "";
    std::string list;
    for (const char* a : allowed) {
        if (*v == a) return *v;
        list += list.empty() ? a : std::string(", ") + a;
    }
    fail(name, "=", *v, ": expected one of ", list);
}

int layers(const char* name) {
    const auto v = env_value(name);
    if (!v) return -1;
    char* end = nullptr;
    const long n = std::strtol(v->c_str(), &end, 10);
    if (*end || n < 0 || n > 1000000) fail(name, "=", *v, ": not a layer count (an integer >= 0)");
    return int(n);
}

}  // namespace

EnvSettings read_env() {
    EnvSettings e;
    e.simd = one_of("SPECULA_SIMD", {"scalar", "avx2", "avx512", "amx"});
    e.amx = one_of("SPECULA_AMX", {"0", "1", "emulate"});
    if (e.amx == "1") e.amx = "";
    e.packed_pair = on_unless_zero("SPECULA_PACKED_PAIR");
    if (const auto v = env_value("SPECULA_BF16_DOT")) e.bf16_dot = *v != "0";
    if (const auto v = env_value("SPECULA_KQ_MULLD")) e.kq_mulld = *v != "0";
    e.hugepages = on_unless_zero("SPECULA_HUGEPAGES");
    e.repack = on_unless_zero("SPECULA_REPACK");
    e.repack_float = on_unless_zero("SPECULA_REPACK_FLOAT");
    e.ngl = layers("SPECULA_NGL");
    e.ngld = layers("SPECULA_NGLD");
    if (const auto v = env_value("SPECULA_VULKAN_MEMORY_MIB")) {
        char* end = nullptr;
        const double mib = std::strtod(v->c_str(), &end);
        if (end == v->c_str() || *end || !(mib > 0) || mib > 1e9)
            fail("SPECULA_VULKAN_MEMORY_MIB=", *v, ": not a positive number of MiB");
        e.vulkan_memory_mib = mib;
    }
    return e;
}

const EnvSettings& env_settings() {
    static const EnvSettings e = read_env();
    return e;
}

}  // namespace specula
