// GGUF reader: versions 1 (legacy, 32-bit counts), 2 and 3. The whole file is mmapped; tensor data
// is used in place. open() validates everything before returning and throws specula::Error with a
// message naming the file and what is wrong (bad magic, unsupported version, truncated header or
// data, tensor outside the file, overflowing dims, unknown type, duplicate names, misalignment,
// absurd counts).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file_identity.h"
#include "gguf/ggml_types.h"

namespace specula {

enum class GGUFType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};
std::string_view gguf_type_name(GGUFType t);

// One metadata value. Scalars live in u/i/f/b by kind, strings in s; arrays hold their element
// type and elements (arrays of arrays nest).
struct GGUFValue {
    GGUFType type = GGUFType::UINT8;
    uint64_t u = 0;                        // UINT8..UINT64
    int64_t i = 0;                         // INT8..INT64
    double f = 0;                          // FLOAT32/FLOAT64
    bool b = false;                        // BOOL
    std::string s;                         // STRING
    GGUFType elem_type = GGUFType::UINT8;  // ARRAY
    std::vector<GGUFValue> arr;            // ARRAY

    bool is_integer() const;
    bool is_number() const;  // integer, float or bool
    // Numeric value converted; throws Error naming `key` if the value is not numeric.
    int64_t as_int(std::string_view key = "") const;
    double as_float(std::string_view key = "") const;
    std::string to_string(size_t max_elems = 8) const;  // for `specula info`
};

struct GGUFTensor {
    std::string name;
    std::vector<int64_t> ne;  // dims, ne[0] is the contiguous (row) dimension
    GGMLType type = GGMLType::F32;
    uint64_t offset = 0;  // relative to the start of the data section
    uint64_t nbytes = 0;
    const uint8_t* data = nullptr;  // points into the mapping
    int64_t n_elements() const;
    int64_t n_rows() const { return ne.empty() ? 0 : n_elements() / ne[0]; }
};

class GGUFFile {
  public:
    // Maps and validates `path`. Throws Error.
    static std::unique_ptr<GGUFFile> open(const std::string& path);
    ~GGUFFile();
    GGUFFile(const GGUFFile&) = delete;
    GGUFFile& operator=(const GGUFFile&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t file_size() const { return size_; }
    uint64_t data_offset() const { return data_offset_; }

    // Metadata in file order.
    const std::vector<std::pair<std::string, GGUFValue>>& metadata() const { return kv_; }
    const GGUFValue* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }

    // Typed getters. The *_or forms return `def` when the key is absent; all throw Error naming
    // the key when it is present with an incompatible type.
    std::string get_string(std::string_view key) const;  // throws if absent
    std::string get_string_or(std::string_view key, const std::string& def) const;
    int64_t get_int(std::string_view key) const;  // any integer type; throws if absent
    int64_t get_int_or(std::string_view key, int64_t def) const;
    double get_float_or(std::string_view key, double def) const;
    bool get_bool_or(std::string_view key, bool def) const;
    std::vector<std::string> get_string_array(std::string_view key) const;  // empty if absent
    std::vector<float> get_float_array(std::string_view key) const;         // empty if absent
    std::vector<int32_t> get_int_array(std::string_view key) const;         // empty if absent

    // "" while the file on disk is the one mapped; otherwise a message naming the file: it was
    // written to or truncated in place since open() (its size or modification time differ, or
    // its status-change time does and so does a sampled hash of its content: a rewrite with the
    // mtime restored), or a page of it vanished (SIGBUS, survived: gguf/mapping_guard.h). Tensor
    // data read after such a change may be anything: a server checks this before handing out
    // what it computed. A file replaced by rename is not a change: the mapping keeps the old
    // one. Cheap: one fstat (and a few preads once per new ctime, e.g. after a chmod).
    std::string changed_on_disk() const;
    // The file as opened: size, times, device and inode, sampled content hash.
    const FileIdentity& identity() const { return id_; }

    const std::vector<GGUFTensor>& tensors() const { return tensors_; }
    const GGUFTensor* find_tensor(std::string_view name) const;
    // Throws Error "<file>: missing tensor <name>" when absent.
    const GGUFTensor& tensor(std::string_view name) const;

  private:
    GGUFFile() = default;
    std::string path_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t size_ = 0;
    uint64_t data_offset_ = 0;
    void* map_ = nullptr;
    int fd_ = -1, guard_ = -1;
    FileIdentity id_;                                 // at open
    mutable std::atomic<int64_t> verified_ctime_{0};  // a ctime whose sampled hash matched
    std::vector<std::pair<std::string, GGUFValue>> kv_;
    std::map<std::string, size_t, std::less<>> kv_index_;
    std::vector<GGUFTensor> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace specula
