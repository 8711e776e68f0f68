// GGUF reader: maps the file read-only, parses the header with a bounds-checked cursor and
// validates every count, type, shape and offset before open() returns. Any defect throws
// specula::Error naming the file and the offending key / tensor / field.
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "gguf/mapping_guard.h"

namespace specula {

// ---------------------------------------------------------------------------------------------
// Bounds-checked cursor over the mapped bytes

namespace {

constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 16;

// Names the field being read, for error messages; formatted only when a read fails, so the hot
// path (hundreds of thousands of vocab strings) builds no strings.
struct Field {
    const char* label;           // "value of key", "dims of tensor", ...
    std::string_view name = {};  // key or tensor name, quoted when present
    int64_t index = -1;          // kv / tensor number, printed as #index when >= 0
};

std::ostream& operator<<(std::ostream& os, const Field& f) {
    os << f.label;
    if (!f.name.empty()) os << " '" << f.name << "'";
    if (f.index >= 0) os << " #" << f.index;
    return os;
}

class Cursor {
  public:
    Cursor(const std::string& path, const uint8_t* data, uint64_t size, uint32_t version)
        : path_(path), data_(data), size_(size), version_(version) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }
    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }

    void need(uint64_t n, const Field& what) const {
        if (n > remaining()) {
            fail(path_, ": truncated while reading ", what, " at offset ", pos_, " (need ", n,
                 " bytes, ", remaining(), " left)");
        }
    }

    template <class T>
    T read(const Field& what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    // Counts and lengths are u32 in GGUF v1, u64 later.
    uint64_t read_len(const Field& what) {
        return version_ == 1 ? read<uint32_t>(what) : read<uint64_t>(what);
    }
    uint64_t len_size() const { return version_ == 1 ? 4 : 8; }

    std::string read_string(const Field& what) {
        uint64_t n = read_len(what);
        if (n > remaining()) {
            fail(path_, ": ", what, ": string length ", n, " at offset ", pos_ - len_size(),
                 " runs past the end of the file (", remaining(), " bytes left)");
        }
        std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
        pos_ += n;
        return s;
    }

  private:
    const std::string& path_;
    const uint8_t* data_;
    uint64_t size_;
    uint32_t version_;
    uint64_t pos_ = 0;
};

// Smallest encoding of one value of type t (used to reject absurd counts before allocating).
uint64_t min_value_size(GGUFType t, uint64_t len_size) {
    switch (t) {
        case GGUFType::UINT8:
        case GGUFType::INT8:
        case GGUFType::BOOL:
            return 1;
        case GGUFType::UINT16:
        case GGUFType::INT16:
            return 2;
        case GGUFType::UINT32:
        case GGUFType::INT32:
        case GGUFType::FLOAT32:
            return 4;
        case GGUFType::UINT64:
        case GGUFType::INT64:
        case GGUFType::FLOAT64:
            return 8;
        case GGUFType::STRING:
            return len_size;
        case GGUFType::ARRAY:
            return 4 + len_size;
    }
    return 1;
}

GGUFType read_value_type(Cursor& c, const std::string& key) {
    uint32_t t = c.read<uint32_t>(Field{"value type of key", key});
    if (t > static_cast<uint32_t>(GGUFType::FLOAT64)) {
        fail(c.path(), ": key '", key, "': unknown value type ", t, " at offset ", c.pos() - 4);
    }
    return static_cast<GGUFType>(t);
}

void read_value(Cursor& c, GGUFValue& v, GGUFType type, const std::string& key, int depth);

void read_array(Cursor& c, GGUFValue& v, const std::string& key, int depth) {
    if (depth >= kMaxArrayDepth) {
        fail(c.path(), ": key '", key, "': arrays nested deeper than ", kMaxArrayDepth);
    }
    v.elem_type = read_value_type(c, key);
    uint64_t n = c.read_len(Field{"array count of key", key});
    uint64_t min_size = min_value_size(v.elem_type, c.len_size());
    if (n > c.remaining() / min_size) {
        fail(c.path(), ": key '", key, "': array count ", n, " of ", gguf_type_name(v.elem_type),
             " cannot fit in the ", c.remaining(), " bytes left");
    }
    v.arr.resize(n);
    for (GGUFValue& e : v.arr) read_value(c, e, v.elem_type, key, depth + 1);
}

// Reads one value of `type` into v (in place: vocab arrays hold 100k+ elements).
void read_value(Cursor& c, GGUFValue& v, GGUFType type, const std::string& key, int depth) {
    v.type = type;
    const Field what{"value of key", key};
    switch (type) {
        case GGUFType::UINT8:
            v.u = c.read<uint8_t>(what);
            break;
        case GGUFType::INT8:
            v.i = c.read<int8_t>(what);
            break;
        case GGUFType::UINT16:
            v.u = c.read<uint16_t>(what);
            break;
        case GGUFType::INT16:
            v.i = c.read<int16_t>(what);
            break;
        case GGUFType::UINT32:
            v.u = c.read<uint32_t>(what);
            break;
        case GGUFType::INT32:
            v.i = c.read<int32_t>(what);
            break;
        case GGUFType::UINT64:
            v.u = c.read<uint64_t>(what);
            break;
        case GGUFType::INT64:
            v.i = c.read<int64_t>(what);
            break;
        case GGUFType::FLOAT32:
            v.f = c.read<float>(what);
            break;
        case GGUFType::FLOAT64:
            v.f = c.read<double>(what);
            break;
        case GGUFType::BOOL: {
            uint8_t b = c.read<uint8_t>(what);
            if (b > 1) fail(c.path(), ": key '", key, "': bool value ", int(b), " is not 0 or 1");
            v.b = b != 0;
            break;
        }
        case GGUFType::STRING:
            v.s = c.read_string(what);
            break;
        case GGUFType::ARRAY:
            read_array(c, v, key, depth);
            break;
    }
}

uint64_t align_up(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

// RAII holder for the mapping while open() validates; released into the GGUFFile on success.
struct Mapping {
    void* ptr = nullptr;
    uint64_t size = 0;
    int fd = -1;  // kept open: changed_on_disk() asks it what the file is now
    struct stat st {};
    ~Mapping() {
        if (ptr) munmap(ptr, size);
        if (fd >= 0) ::close(fd);
    }
};

void map_file(const std::string& path, Mapping& m) {
    // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; it is refused below.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(path, ": not a regular file");
    }
    m.size = static_cast<uint64_t>(st.st_size);
    if (m.size < 8) {
        ::close(fd);
        fail(path, ": file is ", m.size, " bytes, shorter than the GGUF header (truncated)");
    }
    m.fd = fd;
    m.st = st;
    void* p = mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) fail(path, ": mmap failed: ", std::strerror(errno));
    m.ptr = p;
}

// The tensors must tile the data section: no two overlap, and no more than the alignment
// padding lies between two of them or after the last. A header whose tensor count is too small
// parses fine but starts the data section early (every weight read shifted) and leaves the
// uncounted tensors' bytes unclaimed: caught here, as is tensor data shared by two names.
void check_data_layout(const std::string& path, const std::vector<GGUFTensor>& tensors,
                       uint64_t data_size, uint64_t alignment) {
    if (tensors.empty()) return;
    std::vector<const GGUFTensor*> by_offset;
    for (const GGUFTensor& t : tensors) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GGUFTensor* a, const GGUFTensor* b) { return a->offset < b->offset; });
    uint64_t end = 0;  // of the previous tensor's data
    const GGUFTensor* prev = nullptr;
    for (const GGUFTensor* t : by_offset) {
        if (prev && t->offset < end) {
            fail(path, ": tensors '", prev->name, "' and '", t->name, "' overlap (data [",
                 prev->offset, ", ", end, ") and [", t->offset, ", ", t->offset + t->nbytes, "))");
        }
        if (t->offset - end >= alignment) {
            fail(path, ": ", t->offset - end, " bytes of tensor data before tensor '", t->name,
                 "' (at ", end, ") belong to no tensor: the header's tensor count (",
                 tensors.size(), ") is probably wrong, or the file is corrupt");
        }
        end = t->offset + t->nbytes;
        prev = t;
    }
    if (data_size - end >= alignment) {
        fail(path, ": the last ", data_size - end, " bytes of tensor data (from ", end,
             ") belong to no tensor: the header's tensor count (", tensors.size(),
             ") is probably wrong, or the file is corrupt");
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing

namespace {

struct Parser {
    Cursor& c;
    std::vector<std::pair<std::string, GGUFValue>>& kv;
    std::map<std::string, size_t, std::less<>>& kv_index;
    std::vector<GGUFTensor>& tensors;
    std::map<std::string, size_t, std::less<>>& tensor_index;

    void read_kv(uint64_t n_kv) {
        // key length + value type + at least one byte of value
        uint64_t min_kv = c.len_size() + 4 + 1;
        if (n_kv > c.remaining() / min_kv) {
            fail(c.path(), ": kv count ", n_kv, " cannot fit in the ", c.remaining(),
                 " bytes left");
        }
        for (uint64_t k = 0; k < n_kv; ++k) {
            std::string key = c.read_string(Field{"key of kv", {}, static_cast<int64_t>(k)});
            if (kv_index.count(key)) fail(c.path(), ": duplicate key '", key, "'");
            GGUFType t = read_value_type(c, key);
            GGUFValue v;
            read_value(c, v, t, key, 0);
            kv_index.emplace(key, kv.size());
            kv.emplace_back(std::move(key), std::move(v));
        }
    }

    void read_tensor_infos(uint64_t n_tensors) {
        // name length + n_dims + one dim + type + offset
        uint64_t min_info = c.len_size() + 4 + (c.version() == 1 ? 4 : 8) + 4 + 8;
        if (n_tensors > c.remaining() / min_info) {
            fail(c.path(), ": tensor count ", n_tensors, " cannot fit in the ", c.remaining(),
                 " bytes left");
        }
        tensors.reserve(n_tensors);
        for (uint64_t k = 0; k < n_tensors; ++k) read_tensor_info(k);
    }

    void read_tensor_info(uint64_t k) {
        GGUFTensor t;
        t.name = c.read_string(Field{"name of tensor", {}, static_cast<int64_t>(k)});
        const std::string what = "tensor '" + t.name + "'";
        if (tensor_index.count(t.name)) fail(c.path(), ": duplicate tensor name '", t.name, "'");
        uint32_t n_dims = c.read<uint32_t>(Field{"n_dims of tensor", t.name});
        if (n_dims == 0 || n_dims > kMaxDims) {
            fail(c.path(), ": ", what, ": n_dims ", n_dims, " (must be 1..", kMaxDims, ")");
        }
        int64_t n = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            uint64_t dim = c.version() == 1 ? c.read<uint32_t>(Field{"dims of tensor", t.name})
                                            : c.read<uint64_t>(Field{"dims of tensor", t.name});
            if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                fail(c.path(), ": ", what, ": dimension ", d, " is ", static_cast<int64_t>(dim),
                     " (must be > 0)");
            }
            if (__builtin_mul_overflow(n, static_cast<int64_t>(dim), &n)) {
                fail(c.path(), ": ", what, ": element count overflows int64");
            }
            t.ne.push_back(static_cast<int64_t>(dim));
        }
        uint32_t type = c.read<uint32_t>(Field{"type of tensor", t.name});
        const TypeTraits& tr = type_traits(type);
        if (!tr.known) fail(c.path(), ": ", what, ": unknown tensor type ", type);
        t.type = static_cast<GGMLType>(type);
        if (t.ne[0] % tr.block_size != 0) {
            fail(c.path(), ": ", what, ": ne[0] = ", t.ne[0], " is not a multiple of the ", tr.name,
                 " block size ", tr.block_size);
        }
        // n / block_size blocks of type_size bytes; n fits int64, the product may not.
        uint64_t blocks = static_cast<uint64_t>(n / tr.block_size);
        if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(tr.type_size), &t.nbytes)) {
            fail(c.path(), ": ", what, ": byte size overflows");
        }
        t.offset = c.read<uint64_t>(Field{"offset of tensor", t.name});
        tensor_index.emplace(t.name, tensors.size());
        tensors.push_back(std::move(t));
    }
};

uint64_t read_alignment(const std::string& path, const GGUFValue* v) {
    if (!v) return 32;
    if (v->type != GGUFType::UINT32) {
        fail(path, ": general.alignment has type ", gguf_type_name(v->type), ", expected u32");
    }
    if (v->u == 0 || (v->u & (v->u - 1)) != 0) {
        fail(path, ": general.alignment ", v->u, " is not a nonzero power of two");
    }
    return v->u;
}

}  // namespace

std::unique_ptr<GGUFFile> GGUFFile::open(const std::string& path) {
    Mapping m;
    map_file(path, m);
    const auto* bytes = static_cast<const uint8_t*>(m.ptr);

    std::unique_ptr<GGUFFile> f(new GGUFFile());
    f->path_ = path;
    f->size_ = m.size;

    if (std::memcmp(bytes, "GGUF", 4) != 0) {
        fail(path, ": bad magic (not a GGUF file): first bytes ", int(bytes[0]), " ", int(bytes[1]),
             " ", int(bytes[2]), " ", int(bytes[3]));
    }
    uint32_t version;
    std::memcpy(&version, bytes + 4, 4);
    if (version == 0 || version > 3) {
        fail(path, ": unsupported GGUF version ", version,
             (version > 0xFFFF ? " (big-endian file?)" : ""), "; supported are 1, 2 and 3");
    }
    f->version_ = version;

    Cursor c(path, bytes, m.size, version);
    c.read<uint64_t>(Field{"header"});  // magic + version, checked above
    uint64_t n_tensors = c.read_len(Field{"tensor count"});
    uint64_t n_kv = c.read_len(Field{"kv count"});

    Parser p{c, f->kv_, f->kv_index_, f->tensors_, f->tensor_index_};
    p.read_kv(n_kv);
    f->alignment_ = read_alignment(path, f->find("general.alignment"));
    p.read_tensor_infos(n_tensors);

    f->data_offset_ = align_up(c.pos(), f->alignment_);
    if (!f->tensors_.empty() && f->data_offset_ > m.size) {
        fail(path, ": truncated: data section would start at ", f->data_offset_,
             " past the end of the file (", m.size, " bytes)");
    }
    const uint64_t data_size = f->tensors_.empty() ? 0 : m.size - f->data_offset_;
    for (GGUFTensor& t : f->tensors_) {
        if (t.offset % f->alignment_ != 0) {
            fail(path, ": tensor '", t.name, "': offset ", t.offset, " is misaligned (alignment ",
                 f->alignment_, ")");
        }
        if (t.offset > data_size || t.nbytes > data_size - t.offset) {
            fail(path, ": tensor '", t.name, "': data [", t.offset, ", +", t.nbytes,
                 ") extends past the end of the file (data section holds ", data_size, " bytes)");
        }
        t.data = bytes + f->data_offset_ + t.offset;
    }
    check_data_layout(path, f->tensors_, data_size, f->alignment_);

    f->map_ = m.ptr;
    m.ptr = nullptr;  // owned by f now
    f->fd_ = m.fd;
    m.fd = -1;
    file_identity(f->fd_, f->id_);  // what changed_on_disk() compares with
    f->guard_ = guard_mapping(f->map_, f->size_);
    return f;
}

GGUFFile::~GGUFFile() {
    unguard_mapping(guard_);
    if (map_) munmap(map_, size_);
    if (fd_ >= 0) ::close(fd_);
}

}  // namespace specula
