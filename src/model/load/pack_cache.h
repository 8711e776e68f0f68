// The packed weights of a model kept in a file (LoadOptions::repack_cache, `--repack-cache DIR`),
// so that a later load maps them instead of repacking.
//
// Repacking at load (pack_weights) writes every packed matrix into new anonymous memory: for an
// 8B Q4_K_M file 4.7 GB read, rearranged and written, on a VM whose host backs memory only when it
// is first touched most of a load's time. With a cache directory the first load writes its packed
// matrices to DIR/<model file name>.<path hash>.<key>.packed; a later load of the same file maps it
// read-only (shared page cache pages: replicas of a server on one host hold one copy) and packs
// nothing. The key hashes the model file's identity (size, modification time, device, inode and
// sampled content: gguf/file_identity.h), an MTP sidecar's, the layout's version and every packed
// matrix's type and shape, so a changed file, another Specula layout or another set of packed
// matrices never maps a stale cache: it is packed again and a new file written.
//
// Promises:
//  - A cache that is missing, short, or whose header disagrees with the key and sizes is not
//    used (the load repacks); one that cannot be written (no space, no permission) costs a
//    warning naming the path, never the load.
//  - A cache is written under a temporary name and renamed into place, so no reader ever maps a
//    half-written file and Specula never truncates a file that another process maps. Once it is
//    in place, the older caches of the same model file (other keys) are removed: a re-downloaded
//    or re-quantized model does not leave its old packed copy behind (a process that maps one
//    keeps its pages until it unmaps it).
//  - The packed bytes are those pack_weights makes (the same bits whether mapped or packed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace specula {

class GGUFFile;

// A mapped cache file: one read-only mapping, unmapped when destroyed.
class PackCacheMap {
  public:
    PackCacheMap(void* base, size_t bytes, std::vector<size_t> offsets)
        : base_(base), bytes_(bytes), offsets_(std::move(offsets)) {}
    ~PackCacheMap();
    PackCacheMap(const PackCacheMap&) = delete;
    PackCacheMap& operator=(const PackCacheMap&) = delete;
    // Matrix i's packed bytes (in the order of the sizes given to map_pack_cache).
    const uint8_t* data() const { return static_cast<const uint8_t*>(base_); }
    size_t size() const { return bytes_; }
    const uint8_t* matrix(size_t i) const {
        return static_cast<const uint8_t*>(base_) + offsets_[i];
    }

  private:
    void* base_;
    size_t bytes_;
    std::vector<size_t> offsets_;
};

// The key of a set of packed matrices (each its GGML type, rows, columns and packed size, in the
// order pack_weights lists them) of the model file and its MTP sidecar (null: none).
struct PackedMatrixDesc {
    uint32_t type;
    int64_t rows, cols;
    size_t bytes;
};
uint64_t pack_cache_key(const GGUFFile& model, const GGUFFile* sidecar,
                        std::span<const PackedMatrixDesc> matrices);

// DIR/<model file name>.<hash of its absolute path, 8 hex digits>.<key, 16 hex digits>.packed
std::string pack_cache_path(const std::string& dir, const std::string& model_path, uint64_t key);

// Removes the caches beside `path` (a pack_cache_path) of the same model file path under another
// key: those a changed file, layout or matrix set left. A file of the same name in another folder
// hashes another path and keeps its cache. Returns how many it removed (each named on stderr).
int remove_stale_pack_caches(const std::string& path);

// The cache at `path` mapped, or null when it is missing or does not hold exactly these matrices
// under this key.
std::unique_ptr<PackCacheMap> map_pack_cache(const std::string& path, uint64_t key,
                                             std::span<const PackedMatrixDesc> matrices);

// Writes the matrices' packed bytes (data[i]: matrices[i].bytes each) as the cache at `path`
// (creating its directory). Returns false, after a warning on stderr naming the path and the
// reason, when it cannot.
bool write_pack_cache(const std::string& path, uint64_t key,
                      std::span<const PackedMatrixDesc> matrices,
                      std::span<const uint8_t* const> data);

}  // namespace specula
