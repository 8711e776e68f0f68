// Fuzzes GGUF loading: the input is written to a file and opened with GGUFFile::open, then (when
// the header is valid) loaded as a model with Model::load. Bad input must throw specula::Error;
// anything else (a crash, a sanitizer report, another exception, a hang) is a bug.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/load/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = "/tmp/specula-fuzz-gguf-" + std::to_string(getpid());
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    try {
        auto file = specula::GGUFFile::open(path);
        for (const auto& t : file->tensors()) (void)t.n_elements();
        for (const auto& kv : file->metadata()) (void)kv.second.to_string();
        auto model = specula::Model::load(path);
        (void)model->describe();
    } catch (const specula::Error&) {
    }
    return 0;
}
