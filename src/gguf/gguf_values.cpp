// GGUF values and lookups: the type names, a value's checked conversions and printing, and the
// file's lookups by key and tensor name with their typed getters (each naming the key and the
// type found when it does not fit).
#include <cmath>
#include <limits>
#include <sstream>

#include "common/error.h"
#include "gguf/gguf.h"

namespace specula {

// ---------------------------------------------------------------------------------------------
// Value helpers

std::string_view gguf_type_name(GGUFType t) {
    switch (t) {
        case GGUFType::UINT8:
            return "u8";
        case GGUFType::INT8:
            return "i8";
        case GGUFType::UINT16:
            return "u16";
        case GGUFType::INT16:
            return "i16";
        case GGUFType::UINT32:
            return "u32";
        case GGUFType::INT32:
            return "i32";
        case GGUFType::FLOAT32:
            return "f32";
        case GGUFType::BOOL:
            return "bool";
        case GGUFType::STRING:
            return "string";
        case GGUFType::ARRAY:
            return "array";
        case GGUFType::UINT64:
            return "u64";
        case GGUFType::INT64:
            return "i64";
        case GGUFType::FLOAT64:
            return "f64";
    }
    return "unknown";
}

static bool is_unsigned(GGUFType t) {
    return t == GGUFType::UINT8 || t == GGUFType::UINT16 || t == GGUFType::UINT32 ||
           t == GGUFType::UINT64;
}
static bool is_signed(GGUFType t) {
    return t == GGUFType::INT8 || t == GGUFType::INT16 || t == GGUFType::INT32 ||
           t == GGUFType::INT64;
}
static bool is_float(GGUFType t) {
    return t == GGUFType::FLOAT32 || t == GGUFType::FLOAT64;
}
static bool is_numeric_type(GGUFType t) {
    return is_unsigned(t) || is_signed(t) || is_float(t) || t == GGUFType::BOOL;
}

bool GGUFValue::is_integer() const {
    return is_unsigned(type) || is_signed(type);
}
bool GGUFValue::is_number() const {
    return is_integer() || is_float(type) || type == GGUFType::BOOL;
}

int64_t GGUFValue::as_int(std::string_view key) const {
    if (is_signed(type)) return i;
    if (is_unsigned(type)) {
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            fail("key ", key, ": value ", u, " overflows int64");
        }
        return static_cast<int64_t>(u);
    }
    if (type == GGUFType::BOOL) return b ? 1 : 0;
    if (is_float(type)) {
        if (!std::isfinite(f) || f != std::floor(f) || std::fabs(f) > 9.2e18) {
            fail("key ", key, ": value ", f, " is not an integer");
        }
        return static_cast<int64_t>(f);
    }
    fail("key ", key, ": expected a number, found ", gguf_type_name(type));
}

double GGUFValue::as_float(std::string_view key) const {
    if (is_float(type)) return f;
    if (is_signed(type)) return static_cast<double>(i);
    if (is_unsigned(type)) return static_cast<double>(u);
    if (type == GGUFType::BOOL) return b ? 1.0 : 0.0;
    fail("key ", key, ": expected a number, found ", gguf_type_name(type));
}

std::string GGUFValue::to_string(size_t max_elems) const {
    std::ostringstream os;
    if (is_unsigned(type)) {
        os << u;
    } else if (is_signed(type)) {
        os << i;
    } else if (is_float(type)) {
        os << f;
    } else if (type == GGUFType::BOOL) {
        os << (b ? "true" : "false");
    } else if (type == GGUFType::STRING) {
        constexpr size_t kMaxChars = 80;
        os << '"' << (s.size() > kMaxChars ? s.substr(0, kMaxChars) + "..." : s) << '"';
    } else {
        os << gguf_type_name(elem_type) << "[" << arr.size() << "] [";
        for (size_t k = 0; k < arr.size() && k < max_elems; ++k) {
            os << (k ? ", " : "") << arr[k].to_string(max_elems);
        }
        if (arr.size() > max_elems) os << ", ...";
        os << "]";
    }
    return os.str();
}

int64_t GGUFTensor::n_elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
}

// ---------------------------------------------------------------------------------------------
// Lookup and typed getters

const GGUFValue* GGUFFile::find(std::string_view key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

static void wrong_type(const std::string& path, std::string_view key, const GGUFValue& v,
                       const char* expected) {
    std::string found(gguf_type_name(v.type));
    if (v.type == GGUFType::ARRAY) found += " of " + std::string(gguf_type_name(v.elem_type));
    fail(path, ": key '", key, "' has type ", found, ", expected ", expected);
}

std::string GGUFFile::get_string(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) fail(path_, ": missing key '", key, "'");
    if (v->type != GGUFType::STRING) wrong_type(path_, key, *v, "string");
    return v->s;
}

std::string GGUFFile::get_string_or(std::string_view key, const std::string& def) const {
    return has(key) ? get_string(key) : def;
}

int64_t GGUFFile::get_int(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) fail(path_, ": missing key '", key, "'");
    if (!v->is_integer()) wrong_type(path_, key, *v, "an integer");
    try {
        return v->as_int(key);
    } catch (const Error& e) {
        fail(path_, ": ", e.what());
    }
}

int64_t GGUFFile::get_int_or(std::string_view key, int64_t def) const {
    return has(key) ? get_int(key) : def;
}

double GGUFFile::get_float_or(std::string_view key, double def) const {
    const GGUFValue* v = find(key);
    if (!v) return def;
    if (!v->is_number() || v->type == GGUFType::BOOL) wrong_type(path_, key, *v, "a number");
    return v->as_float(key);
}

bool GGUFFile::get_bool_or(std::string_view key, bool def) const {
    const GGUFValue* v = find(key);
    if (!v) return def;
    if (v->type != GGUFType::BOOL) wrong_type(path_, key, *v, "bool");
    return v->b;
}

std::vector<std::string> GGUFFile::get_string_array(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) return {};
    if (v->type != GGUFType::ARRAY || v->elem_type != GGUFType::STRING) {
        wrong_type(path_, key, *v, "array of string");
    }
    std::vector<std::string> out;
    out.reserve(v->arr.size());
    for (const GGUFValue& e : v->arr) out.push_back(e.s);
    return out;
}

std::vector<float> GGUFFile::get_float_array(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) return {};
    if (v->type != GGUFType::ARRAY || !is_numeric_type(v->elem_type)) {
        wrong_type(path_, key, *v, "array of numbers");
    }
    std::vector<float> out;
    out.reserve(v->arr.size());
    for (const GGUFValue& e : v->arr) out.push_back(static_cast<float>(e.as_float(key)));
    return out;
}

std::vector<int32_t> GGUFFile::get_int_array(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) return {};
    if (v->type != GGUFType::ARRAY || !is_numeric_type(v->elem_type)) {
        wrong_type(path_, key, *v, "array of numbers");
    }
    std::vector<int32_t> out;
    out.reserve(v->arr.size());
    for (size_t k = 0; k < v->arr.size(); ++k) {
        int64_t x;
        try {
            x = v->arr[k].as_int(key);
        } catch (const Error& e) {
            fail(path_, ": ", e.what(), " (element ", k, ")");
        }
        if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max()) {
            fail(path_, ": key '", key, "': element ", k, " = ", x, " does not fit in int32");
        }
        out.push_back(static_cast<int32_t>(x));
    }
    return out;
}

const GGUFTensor* GGUFFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GGUFTensor& GGUFFile::tensor(std::string_view name) const {
    const GGUFTensor* t = find_tensor(name);
    if (!t) fail(path_, ": missing tensor ", name);
    return *t;
}

}  // namespace specula
