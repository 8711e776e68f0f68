// Slot files: see slot_files.h.
#include "server/serving/slot_files.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/error.h"

namespace specula {

namespace {

constexpr char kMagic[16] = {'S', 'P', 'E', 'C', 'U', 'L', 'A', '-',
                             'S', 'L', 'O', 'T', 0,   0,   0,   2};
constexpr size_t kHeader = sizeof kMagic + 4 * sizeof(uint64_t);

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

std::string slot_file_path(const std::string& dir, const std::string& filename) {
    if (filename.empty() || filename.size() > 255 || filename[0] == '.' ||
        filename.find('/') != std::string::npos || filename.find('\\') != std::string::npos ||
        filename.find('\0') != std::string::npos)
        fail("slot file name '", filename,
             "' must be a plain file name (no directory, not starting with '.', at most 255 "
             "bytes)");
    return dir + "/" + filename;
}

size_t write_slot_file(const std::string& path, const KVSnapshot& s, const std::string& model_id) {
    const std::string tmp = path + ".part";
    {
        File f(std::fopen(tmp.c_str(), "wb"));
        if (!f) fail(path, ": cannot write the slot file: ", std::strerror(errno));
        const uint64_t n[4] = {s.tokens.size(), s.k.size(), s.v.size(), model_id.size()};
        const bool ok =
            std::fwrite(kMagic, 1, sizeof kMagic, f.get()) == sizeof kMagic &&
            std::fwrite(n, sizeof n, 1, f.get()) == 1 &&
            std::fwrite(s.tokens.data(), sizeof(token_id), s.tokens.size(), f.get()) ==
                s.tokens.size() &&
            std::fwrite(s.k.data(), 1, s.k.size(), f.get()) == s.k.size() &&
            std::fwrite(s.v.data(), 1, s.v.size(), f.get()) == s.v.size() &&
            std::fwrite(model_id.data(), 1, model_id.size(), f.get()) == model_id.size() &&
            std::fflush(f.get()) == 0;
        if (!ok) {
            std::remove(tmp.c_str());
            fail(path, ": cannot write the slot file: ", std::strerror(errno));
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {  // readers never see half a file
        std::remove(tmp.c_str());
        fail(path, ": cannot write the slot file: ", std::strerror(errno));
    }
    return kHeader + s.bytes() + model_id.size();
}

KVSnapshot read_slot_file(const std::string& path, const std::string& model_id, size_t& n_read) {
    File f(std::fopen(path.c_str(), "rb"));
    if (!f) fail(path, ": cannot read the slot file: ", std::strerror(errno));
    if (std::fseek(f.get(), 0, SEEK_END) != 0) fail(path, ": cannot read the slot file");
    const long size = std::ftell(f.get());
    std::rewind(f.get());
    char magic[sizeof kMagic];
    uint64_t n[4];
    if (size < long(kHeader) || std::fread(magic, 1, sizeof magic, f.get()) != sizeof magic ||
        std::memcmp(magic, kMagic, sizeof magic) != 0 || std::fread(n, sizeof n, 1, f.get()) != 1)
        fail(path, ": not a Specula slot file");
    // The header's sizes must add up to the file's size exactly (no overflow: each is bounded
    // by the file size first).
    const uint64_t body = uint64_t(size) - kHeader;
    if (n[0] > body / sizeof(token_id) || n[1] > body || n[2] > body || n[3] > 4096 ||
        n[0] * sizeof(token_id) + n[1] + n[2] + n[3] != body)
        fail(path, ": slot file truncated or corrupt (its header says ", n[0], " tokens, ", n[1],
             " + ", n[2], " bytes of K/V; the file has ", body, " bytes after the header)");
    KVSnapshot s;
    s.tokens.resize(n[0]);
    s.k.resize(n[1]);
    s.v.resize(n[2]);
    if (std::fread(s.tokens.data(), sizeof(token_id), n[0], f.get()) != n[0] ||
        std::fread(s.k.data(), 1, n[1], f.get()) != n[1] ||
        std::fread(s.v.data(), 1, n[2], f.get()) != n[2])
        fail(path, ": cannot read the slot file");
    std::string id(n[3], '\0');
    if (std::fread(id.data(), 1, n[3], f.get()) != n[3]) fail(path, ": cannot read the slot file");
    if (id != model_id)
        fail(path, ": the slot file was saved from another model (", id, "); this server runs ",
             model_id);
    n_read = size_t(size);
    return s;
}

}  // namespace specula
