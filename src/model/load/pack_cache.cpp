// The packed-weights cache file (pack_cache.h). Layout: a header of 8 magic bytes, the key, the
// matrix count n, then n records {type, rows, cols, bytes} (8 bytes each field), padded to a page;
// then each matrix's bytes at a page-aligned offset, one after the other.
#include "model/load/pack_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/fnv.h"
#include "gguf/gguf.h"

namespace specula {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'S', 'P', 'C', 'P', 'A', 'C', 'K', '1'};
constexpr uint64_t kLayoutVersion = 1;  // raise when a packed layout (kernels/layout/) changes
constexpr size_t kPage = 4096;

size_t round_up(size_t n) {
    return (n + kPage - 1) / kPage * kPage;
}

struct FileLayout {
    std::vector<uint64_t> header;  // the header's words, before padding
    std::vector<size_t> offsets;   // each matrix's first byte
    size_t total = 0;              // the file's size
};

FileLayout layout(uint64_t key, std::span<const PackedMatrixDesc> ms) {
    FileLayout l;
    uint64_t magic;
    std::memcpy(&magic, kMagic, 8);
    l.header = {magic, key, uint64_t(ms.size())};
    for (const PackedMatrixDesc& m : ms)
        l.header.insert(l.header.end(), {m.type, uint64_t(m.rows), uint64_t(m.cols), m.bytes});
    size_t at = round_up(l.header.size() * 8);
    for (const PackedMatrixDesc& m : ms) {
        l.offsets.push_back(at);
        at = round_up(at + m.bytes);
    }
    l.total = at;
    return l;
}

uint64_t hash_identity(uint64_t h, const FileIdentity& id) {
    for (const uint64_t v : {id.size, uint64_t(id.mtime_ns), id.dev, id.ino, id.sample_hash})
        h = fnv1a_u64(h, v);
    return h;
}

bool write_all(int fd, const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
        const ssize_t w = ::write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        b += w;
        n -= size_t(w);
    }
    return true;
}

// The file mapped read-only at a 2 MiB-aligned address, so that where the page cache holds it in
// 2 MiB folios (ext4's large folios) the kernel maps them whole: a decode step streams the packed
// weights through 2 MiB pages, as it does those packed into anonymous memory (on 4 KiB pages a
// Qwen3-8B-shaped Q4_K_M file decoded at a third of the speed on a 2-core VM). Null on failure.
void* map_aligned(int fd, size_t bytes) {
    constexpr size_t kHuge = size_t{2} << 20;
    void* r =
        mmap(nullptr, bytes + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) return nullptr;
    const auto a = reinterpret_cast<uintptr_t>(r);
    const uintptr_t at = (a + kHuge - 1) / kHuge * kHuge;
    if (at > a) munmap(r, at - a);  // the reservation's ends, around the file's mapping
    if (a + kHuge > at) munmap(reinterpret_cast<void*>(at + bytes), a + kHuge - at);
    void* p = mmap(reinterpret_cast<void*>(at), bytes, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        munmap(reinterpret_cast<void*>(at), bytes);
        return nullptr;
    }
    madvise(p, bytes, MADV_HUGEPAGE);
    madvise(p, bytes, MADV_POPULATE_READ);
    return p;
}

}  // namespace

PackCacheMap::~PackCacheMap() {
    if (base_) munmap(base_, bytes_);
}

uint64_t pack_cache_key(const GGUFFile& model, const GGUFFile* sidecar,
                        std::span<const PackedMatrixDesc> matrices) {
    uint64_t h = fnv1a_u64(kFnv1aBasis, kLayoutVersion);
    h = hash_identity(h, model.identity());
    if (sidecar) h = hash_identity(h, sidecar->identity());
    for (const PackedMatrixDesc& m : matrices) {
        for (const uint64_t v : {uint64_t(m.type), uint64_t(m.rows), uint64_t(m.cols), m.bytes})
            h = fnv1a_u64(h, v);
    }
    return h;
}

std::string pack_cache_path(const std::string& dir, const std::string& model_path, uint64_t key) {
    std::error_code ec;
    fs::path abs = fs::weakly_canonical(fs::absolute(model_path, ec), ec);
    if (abs.empty()) abs = model_path;
    const std::string name = abs.string();
    const uint64_t h = fnv1a(kFnv1aBasis, name.data(), name.size());
    char hex[32];
    std::snprintf(hex, sizeof hex, ".%08llx.%016llx", static_cast<unsigned long long>(h >> 32),
                  static_cast<unsigned long long>(key));
    return (fs::path(dir) / (abs.filename().string() + hex + ".packed")).string();
}

int remove_stale_pack_caches(const std::string& path) {
    // <name>.<path hash>.<key>.packed: the siblings that differ only in the key.
    const fs::path p(path);
    const std::string name = p.filename().string();
    constexpr size_t kTail = 1 + 16 + 7;  // ".<key>.packed"
    if (name.size() <= kTail) return 0;
    const std::string prefix = name.substr(0, name.size() - kTail);
    int removed = 0;
    std::error_code ec;
    for (fs::directory_iterator it(p.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
        const std::string other = it->path().filename().string();
        if (other == name || other.size() != name.size() || other.rfind(prefix, 0) != 0 ||
            !other.ends_with(".packed") || !it->is_regular_file(ec))
            continue;
        std::error_code rm;
        if (fs::remove(it->path(), rm)) {
            std::fprintf(stderr, "--repack-cache: removed %s (an older cache of the same file)\n",
                         it->path().c_str());
            ++removed;
        }
    }
    return removed;
}

std::unique_ptr<PackCacheMap> map_pack_cache(const std::string& path, uint64_t key,
                                             std::span<const PackedMatrixDesc> matrices) {
    const FileLayout l = layout(key, matrices);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return nullptr;
    struct stat st {};
    std::vector<uint64_t> header(l.header.size());
    const size_t hb = header.size() * 8;
    const bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) == l.total &&
                    ::pread(fd, header.data(), hb, 0) == ssize_t(hb) && header == l.header;
    void* p = ok ? map_aligned(fd, l.total) : nullptr;
    ::close(fd);
    if (!p) return nullptr;
    return std::make_unique<PackCacheMap>(p, l.total, l.offsets);
}

bool write_pack_cache(const std::string& path, uint64_t key,
                      std::span<const PackedMatrixDesc> matrices,
                      std::span<const uint8_t* const> data) {
    const FileLayout l = layout(key, matrices);
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0;
    const std::vector<uint8_t> zeros(kPage, 0);
    size_t at = 0;
    auto put = [&](const void* p, size_t n) {
        ok = ok && write_all(fd, p, n);
        at += n;
    };
    auto pad = [&](size_t to) {
        while (ok && at < to) put(zeros.data(), std::min(kPage, to - at));
    };
    put(l.header.data(), l.header.size() * 8);
    for (size_t i = 0; i < matrices.size(); ++i) {
        pad(l.offsets[i]);
        put(data[i], matrices[i].bytes);
    }
    pad(l.total);
    const int err = ok ? 0 : errno;
    if (fd >= 0 && ::close(fd) != 0) ok = false;
    if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) ok = false;
    if (!ok) {
        std::fprintf(stderr, "warning: --repack-cache: cannot write %s: %s (the load goes on)\n",
                     path.c_str(), std::strerror(err ? err : errno));
        ::unlink(tmp.c_str());
    } else {
        remove_stale_pack_caches(path);
    }
    return ok;
}

}  // namespace specula
