// The registry table (see arch.h).
#include "model/arch.h"

#include "common/error.h"

namespace specula {

namespace {

const ArchSpec* const kArchs[] = {&kLlamaArch,    &kQwen2Arch,  &kQwen3Arch,    &kQwen3MoeArch,
                                  &kGemma2Arch,   &kGemma3Arch, &kGptOssArch,   &kPhi3Arch,
                                  &kMistral3Arch, &kQwen35Arch, &kQwen35MoeArch};

}  // namespace

std::span<const ArchSpec* const> archs() {
    return kArchs;
}

const ArchSpec& find_arch(std::string_view name, const std::string& path) {
    std::string list;
    for (const ArchSpec* a : kArchs) {
        if (name == a->name) return *a;
        list += (list.empty() ? "" : ", ") + std::string(a->name);
    }
    fail(path, ": unsupported architecture '", name, "' (supported: ", list, ")");
}

}  // namespace specula
