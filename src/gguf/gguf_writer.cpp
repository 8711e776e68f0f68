// GGUF writer: serialises metadata (insertion order) and tensors into one byte buffer in the
// layout the reader expects: header, kv pairs, tensor infos, padding to the alignment, then each
// tensor's data at an aligned offset. Version 1 writes 32-bit counts, lengths and dims.
#include "gguf/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "common/error.h"

namespace specula {

namespace {

class ByteSink {
  public:
    ByteSink(std::vector<uint8_t>& out, uint32_t version) : out_(out), version_(version) {}

    template <class T>
    void put(T v) {
        uint8_t b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T));
        out_.insert(out_.end(), b, b + sizeof(T));
    }
    void put_len(uint64_t n) {
        if (version_ == 1) {
            if (n > UINT32_MAX) fail("GGUF v1 cannot store a count or length of ", n);
            put<uint32_t>(static_cast<uint32_t>(n));
        } else {
            put<uint64_t>(n);
        }
    }
    void put_string(const std::string& s) {
        put_len(s.size());
        out_.insert(out_.end(), s.begin(), s.end());
    }
    void put_bytes(const std::vector<uint8_t>& b) { out_.insert(out_.end(), b.begin(), b.end()); }
    void pad_to(uint64_t alignment) {
        while (out_.size() % alignment != 0) out_.push_back(0);
    }
    uint32_t version() const { return version_; }

  private:
    std::vector<uint8_t>& out_;
    uint32_t version_;
};

void put_value(ByteSink& s, const GGUFValue& v) {
    switch (v.type) {
        case GGUFType::UINT8:
            s.put<uint8_t>(static_cast<uint8_t>(v.u));
            break;
        case GGUFType::INT8:
            s.put<int8_t>(static_cast<int8_t>(v.i));
            break;
        case GGUFType::UINT16:
            s.put<uint16_t>(static_cast<uint16_t>(v.u));
            break;
        case GGUFType::INT16:
            s.put<int16_t>(static_cast<int16_t>(v.i));
            break;
        case GGUFType::UINT32:
            s.put<uint32_t>(static_cast<uint32_t>(v.u));
            break;
        case GGUFType::INT32:
            s.put<int32_t>(static_cast<int32_t>(v.i));
            break;
        case GGUFType::UINT64:
            s.put<uint64_t>(v.u);
            break;
        case GGUFType::INT64:
            s.put<int64_t>(v.i);
            break;
        case GGUFType::FLOAT32:
            s.put<float>(static_cast<float>(v.f));
            break;
        case GGUFType::FLOAT64:
            s.put<double>(v.f);
            break;
        case GGUFType::BOOL:
            s.put<uint8_t>(v.b ? 1 : 0);
            break;
        case GGUFType::STRING:
            s.put_string(v.s);
            break;
        case GGUFType::ARRAY:
            s.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
            s.put_len(v.arr.size());
            for (const GGUFValue& e : v.arr) {
                if (e.type != v.elem_type) {
                    fail("GGUF writer: array element of type ", gguf_type_name(e.type),
                         " in an array of ", gguf_type_name(v.elem_type));
                }
                put_value(s, e);
            }
            break;
        default:
            fail("GGUF writer: unknown value type ", static_cast<uint32_t>(v.type));
    }
}

GGUFValue scalar(GGUFType t) {
    GGUFValue v;
    v.type = t;
    return v;
}

template <class T, class F>
GGUFValue array_of(GGUFType elem, const std::vector<T>& xs, F&& fill) {
    GGUFValue v = scalar(GGUFType::ARRAY);
    v.elem_type = elem;
    v.arr.reserve(xs.size());
    for (const T& x : xs) {
        GGUFValue e = scalar(elem);
        fill(e, x);
        v.arr.push_back(std::move(e));
    }
    return v;
}

}  // namespace

void GGUFWriter::set(const std::string& key, GGUFValue value) {
    for (auto& [k, v] : kv_) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    kv_.emplace_back(key, std::move(value));
}

void GGUFWriter::set_u32(const std::string& key, uint32_t x) {
    GGUFValue v = scalar(GGUFType::UINT32);
    v.u = x;
    set(key, std::move(v));
}

void GGUFWriter::set_i32(const std::string& key, int32_t x) {
    GGUFValue v = scalar(GGUFType::INT32);
    v.i = x;
    set(key, std::move(v));
}

void GGUFWriter::set_f32(const std::string& key, float x) {
    GGUFValue v = scalar(GGUFType::FLOAT32);
    v.f = x;
    set(key, std::move(v));
}

void GGUFWriter::set_bool(const std::string& key, bool x) {
    GGUFValue v = scalar(GGUFType::BOOL);
    v.b = x;
    set(key, std::move(v));
}

void GGUFWriter::set_string(const std::string& key, const std::string& x) {
    GGUFValue v = scalar(GGUFType::STRING);
    v.s = x;
    set(key, std::move(v));
}

void GGUFWriter::set_string_array(const std::string& key, const std::vector<std::string>& xs) {
    set(key, array_of(GGUFType::STRING, xs, [](GGUFValue& e, const std::string& x) { e.s = x; }));
}

void GGUFWriter::set_f32_array(const std::string& key, const std::vector<float>& xs) {
    set(key, array_of(GGUFType::FLOAT32, xs, [](GGUFValue& e, float x) { e.f = x; }));
}

void GGUFWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& xs) {
    set(key, array_of(GGUFType::INT32, xs, [](GGUFValue& e, int32_t x) { e.i = x; }));
}

size_t GGUFWriter::check_tensor(const std::string& name, const std::vector<int64_t>& ne,
                                GGMLType type) const {
    const TypeTraits& tr = type_traits(type);
    if (!tr.known) fail("GGUF writer: tensor '", name, "': unknown type ", uint32_t(type));
    if (ne.empty() || ne.size() > 4) fail("GGUF writer: tensor '", name, "': needs 1..4 dims");
    int64_t n = 1;
    for (int64_t d : ne) {
        if (d <= 0) fail("GGUF writer: tensor '", name, "': dimension ", d, " <= 0");
        if (__builtin_mul_overflow(n, d, &n)) fail("GGUF writer: tensor '", name, "': overflow");
    }
    if (ne[0] % tr.block_size != 0) {
        fail("GGUF writer: tensor '", name, "': ne[0] ", ne[0], " not a multiple of block size ",
             tr.block_size);
    }
    for (const Tensor& t : tensors_) {
        if (t.name == name) fail("GGUF writer: duplicate tensor name '", name, "'");
    }
    return row_size(type, ne[0]) * static_cast<size_t>(n / ne[0]);
}

void GGUFWriter::add_tensor(const std::string& name, const std::vector<int64_t>& ne, GGMLType type,
                            const void* data, size_t nbytes) {
    const size_t expect = check_tensor(name, ne, type);
    if (nbytes != expect) {
        fail("GGUF writer: tensor '", name, "': ", nbytes, " bytes given, ", expect, " expected");
    }
    const auto* p = static_cast<const uint8_t*>(data);
    tensors_.push_back(Tensor{name, ne, type, std::vector<uint8_t>(p, p + nbytes), nbytes, false});
}

void GGUFWriter::add_tensor_info(const std::string& name, const std::vector<int64_t>& ne,
                                 GGMLType type) {
    const size_t nbytes = check_tensor(name, ne, type);
    tensors_.push_back(Tensor{name, ne, type, {}, nbytes, true});
}

void GGUFWriter::copy_from(const GGUFFile& src) {
    for (const auto& [k, v] : src.metadata()) set(k, v);
    for (const GGUFTensor& t : src.tensors()) add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
}

uint64_t GGUFWriter::alignment() const {
    for (const auto& [k, v] : kv_) {
        if (k != "general.alignment") continue;
        if (v.type != GGUFType::UINT32 || v.u == 0 || (v.u & (v.u - 1)) != 0) {
            fail("GGUF writer: general.alignment must be a u32 power of two");
        }
        return v.u;
    }
    return 32;
}

std::vector<uint8_t> GGUFWriter::header_bytes() const {
    if (version_ < 1 || version_ > 3) fail("GGUF writer: cannot write version ", version_);
    const uint64_t align = alignment();
    std::vector<uint8_t> out;
    out.reserve(1 << 16);
    ByteSink s(out, version_);
    s.put<uint32_t>(0x46554747u);  // "GGUF" little-endian
    s.put<uint32_t>(version_);
    s.put_len(tensors_.size());
    s.put_len(kv_.size());
    for (const auto& [k, v] : kv_) {
        s.put_string(k);
        s.put<uint32_t>(static_cast<uint32_t>(v.type));
        put_value(s, v);
    }
    uint64_t offset = 0;
    for (const Tensor& t : tensors_) {
        s.put_string(t.name);
        s.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) {
            if (version_ == 1) {
                s.put_len(static_cast<uint64_t>(d));
            } else {
                s.put<uint64_t>(static_cast<uint64_t>(d));
            }
        }
        s.put<uint32_t>(static_cast<uint32_t>(t.type));
        s.put<uint64_t>(offset);
        offset += (t.nbytes + align - 1) / align * align;
    }
    s.pad_to(align);
    return out;
}

std::vector<uint8_t> GGUFWriter::to_bytes() const {
    for (const Tensor& t : tensors_) {
        if (t.info_only) fail("GGUF writer: tensor '", t.name, "' has no data (add_tensor_info)");
    }
    const uint64_t align = alignment();
    std::vector<uint8_t> out = header_bytes();
    ByteSink s(out, version_);
    for (const Tensor& t : tensors_) {
        s.put_bytes(t.data);
        s.pad_to(align);
    }
    return out;
}

void GGUFWriter::write(const std::string& path) const {
    std::vector<uint8_t> bytes = to_bytes();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) fail(path, ": cannot open for writing");
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) fail(path, ": write failed");
}

}  // namespace specula
