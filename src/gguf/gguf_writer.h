// GGUF writer (version 3, or 2/1 for tests of the legacy readers): metadata in insertion order,
// tensors aligned to general.alignment (default 32). Used by tests (corrupted files, small models)
// and by tools that quantize.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace specula {

class GGUFWriter {
  public:
    explicit GGUFWriter(uint32_t version = 3) : version_(version) {}

    void set(const std::string& key, GGUFValue value);
    void set_u32(const std::string& key, uint32_t v);
    void set_i32(const std::string& key, int32_t v);
    void set_f32(const std::string& key, float v);
    void set_bool(const std::string& key, bool v);
    void set_string(const std::string& key, const std::string& v);
    void set_string_array(const std::string& key, const std::vector<std::string>& v);
    void set_f32_array(const std::string& key, const std::vector<float>& v);
    void set_i32_array(const std::string& key, const std::vector<int32_t>& v);

    // `data` must hold row_size(type, ne[0]) * rows bytes.
    void add_tensor(const std::string& name, const std::vector<int64_t>& ne, GGMLType type,
                    const void* data, size_t nbytes);

    // A tensor whose data the caller writes itself after header_bytes() (a streaming writer:
    // `specula quantize`): the header gets its info and offset, to_bytes() cannot be used.
    void add_tensor_info(const std::string& name, const std::vector<int64_t>& ne, GGMLType type);

    // Copies every key and tensor of `src` (handy to start from a real model).
    void copy_from(const GGUFFile& src);

    // general.alignment if set (must be a u32 power of two, else Error), otherwise 32.
    uint64_t alignment() const;

    std::vector<uint8_t> to_bytes() const;
    // The header alone (magic, counts, metadata, tensor infos, padding to the alignment): the
    // file's data section starts right after it, each tensor at its offset, padded with zeros.
    std::vector<uint8_t> header_bytes() const;
    void write(const std::string& path) const;  // throws Error

  private:
    struct Tensor {
        std::string name;
        std::vector<int64_t> ne;
        GGMLType type;
        std::vector<uint8_t> data;
        uint64_t nbytes = 0;
        bool info_only = false;
    };
    // Checks a tensor's name, dims and type; returns its size in bytes.
    size_t check_tensor(const std::string& name, const std::vector<int64_t>& ne,
                        GGMLType type) const;
    uint32_t version_;
    std::vector<std::pair<std::string, GGUFValue>> kv_;
    std::vector<Tensor> tensors_;
};

}  // namespace specula
