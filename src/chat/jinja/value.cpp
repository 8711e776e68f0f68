#include "chat/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "chat/jinja/unicode.h"

namespace specula::jinja {

Value Value::string(std::string s) {
    charge_allocation(s.size() + sizeof(Text));
    Value v;
    v.kind = Kind::String;
    v.text = std::make_shared<const Text>(std::move(s));
    return v;
}

Value Value::array(Array a, bool tuple) {
    charge_allocation(a.size() * sizeof(Value) + sizeof(Array));
    uint32_t deepest = 0;
    for (const Value& x : a) deepest = std::max(deepest, x.depth);
    check_value_depth(deepest + 1);
    Value v;
    v.depth = deepest + 1;
    v.kind = Kind::Array;
    v.tuple = tuple;
    v.arr = std::make_shared<Array>(std::move(a));
    return v;
}

Value Value::object() {
    charge_allocation(sizeof(Object));
    Value v;
    v.depth = 1;
    v.kind = Kind::Object;
    v.obj = std::make_shared<Object>();
    return v;
}

Value Value::namespace_() {
    charge_allocation(sizeof(Object));
    Value v;
    v.depth = 1;
    v.kind = Kind::Namespace;
    v.obj = std::make_shared<Object>();
    return v;
}

Value Value::function(Function f) {
    Value v;
    v.kind = Kind::Function;
    v.fn = std::make_shared<Function>(std::move(f));
    return v;
}

const std::string& Value::str() const {
    static const std::string empty;
    return text ? text->bytes : empty;
}

// A container freed by the default destructors would free the containers in it from its own
// destructor, one C stack frame per level: a list nested 300,000 deep overflows the stack. Here
// the nested containers only this value holds are moved onto a work list first, so each one is
// freed holding no container (its destructor has nothing left to recurse into).
void Value::release_nested() noexcept {
    std::vector<Value> pending;
    auto take = [&pending](Value& v) {
        if (v.arr && v.arr.use_count() == 1)
            for (Value& x : *v.arr)
                if (x.arr || x.obj) pending.push_back(std::move(x));
        if (v.obj && v.obj.use_count() == 1)
            for (auto& kv : v.obj->items)
                if (kv.second.arr || kv.second.obj) pending.push_back(std::move(kv.second));
    };
    take(*this);
    while (!pending.empty()) {
        Value v = std::move(pending.back());
        pending.pop_back();
        take(v);
    }
}

void Text::index() const {
    if (indexed_) return;
    indexed_ = true;
    ascii_ = true;
    for (unsigned char c : bytes)
        if (c >= 0x80) {
            ascii_ = false;
            break;
        }
    if (ascii_) return;
    starts_.reserve(bytes.size() / 2 + 1);
    for (size_t i = 0; i < bytes.size(); i += utf8_len(bytes, i)) starts_.push_back(uint32_t(i));
    starts_.push_back(uint32_t(bytes.size()));
}

size_t Text::code_point_count() const {
    index();
    return ascii_ ? bytes.size() : starts_.size() - 1;
}

std::pair<size_t, size_t> Text::code_point_span(size_t first, size_t last) const {
    index();
    if (ascii_) return {first, last};
    return {starts_[first], starts_[last]};
}

const Value* Object::find(const std::string& key) const {
    for (const auto& kv : items)
        if (kv.first == key) return &kv.second;
    return nullptr;
}

Value* Object::find(const std::string& key) {
    for (auto& kv : items)
        if (kv.first == key) return &kv.second;
    return nullptr;
}

void Object::set(const std::string& key, Value v) {
    if (Value* old = find(key)) {
        *old = std::move(v);
    } else {
        charge_allocation(key.size() + sizeof(items[0]));
        items.emplace_back(key, std::move(v));
    }
}

bool Value::truthy() const {
    switch (kind) {
        case Kind::Undefined:
        case Kind::Null:
            return false;
        case Kind::Bool:
            return boolean;
        case Kind::Int:
        case Kind::Float:
            return num != 0 && !std::isnan(num);
        case Kind::String:
            return !str().empty();
        case Kind::Array:
            return !arr->empty();
        case Kind::Object:
            return !obj->items.empty();
        case Kind::Namespace:
        case Kind::Function:
            return true;
    }
    return false;
}

const char* Value::type_name() const {
    switch (kind) {
        case Kind::Undefined:
            return "UndefinedValue";
        case Kind::Null:
            return "NullValue";
        case Kind::Bool:
            return "BooleanValue";
        case Kind::Int:
            return "IntegerValue";
        case Kind::Float:
            return "FloatValue";
        case Kind::String:
            return "StringValue";
        case Kind::Array:
            return tuple ? "TupleValue" : "ArrayValue";
        case Kind::Object:
            return "ObjectValue";
        case Kind::Namespace:
            return "NamespaceValue";
        case Kind::Function:
            return "FunctionValue";
    }
    return "?";
}

std::string js_number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
    if (v == 0) return "0";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    const bool neg = s[0] == '-';
    if (neg) s.erase(0, 1);
    const size_t e = s.find('e');
    const int exp = std::atoi(s.c_str() + e + 1);
    std::string digits;
    for (size_t i = 0; i < e; ++i)
        if (s[i] != '.') digits += s[i];
    const int k = int(digits.size()), n = exp + 1;
    std::string out;
    if (k <= n && n <= 21) {
        out = digits + std::string(size_t(n - k), '0');
    } else if (0 < n && n <= 21) {
        out = digits.substr(0, size_t(n)) + "." + digits.substr(size_t(n));
    } else if (-6 < n && n <= 0) {
        out = "0." + std::string(size_t(-n), '0') + digits;
    } else {
        out = digits.substr(0, 1);
        if (k > 1) out += "." + digits.substr(1);
        out += n - 1 >= 0 ? "e+" : "e-";
        out += std::to_string(std::abs(n - 1));
    }
    return neg ? "-" + out : out;
}

std::string float_string(double v) {
    if (v == 0 && std::signbit(v)) return "-0.0";
    if (std::isfinite(v) && std::fmod(v, 1.0) == 0) {
        if (std::fabs(v) >= 1e21) return js_number(v);
        char buf[400];
        std::snprintf(buf, sizeof buf, "%.1f", v);
        return buf;
    }
    return js_number(v);
}

std::string Value::to_output() const {
    switch (kind) {
        case Kind::Undefined:
        case Kind::Null:  // the reference's none holds JavaScript's undefined
            return "undefined";
        case Kind::Bool:
            return boolean ? "true" : "false";
        case Kind::Int:
            return js_number(num);
        case Kind::Float:
            return float_string(num);
        case Kind::String:
            return str();
        case Kind::Array:
        case Kind::Object:
        case Kind::Namespace:
            return to_json(*this, {}, false);
        case Kind::Function:
            return "[function]";
    }
    return "";
}

std::string Value::js_string() const {
    switch (kind) {
        case Kind::Int:
        case Kind::Float:
            return js_number(num);
        case Kind::Array: {
            std::string s;
            for (size_t i = 0; i < arr->size(); ++i) {
                if (i) s += ',';
                s += (*arr)[i].to_output();
            }
            return s;
        }
        case Kind::Object:
        case Kind::Namespace:
            return "[object Map]";
        default:
            return to_output();
    }
}

namespace {

enum class JsType { Undefined, Null, Bool, Number, String, Ref };

JsType js_type(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined:
        case Kind::Null:  // the reference's none holds JavaScript's undefined: none == undefined
            return JsType::Undefined;
        case Kind::Bool:
            return JsType::Bool;
        case Kind::Int:
        case Kind::Float:
            return JsType::Number;
        case Kind::String:
            return JsType::String;
        default:
            return JsType::Ref;
    }
}

const void* identity(const Value& v) {
    if (v.arr) return v.arr.get();
    if (v.obj) return v.obj.get();
    return v.fn.get();
}

double js_to_number(const std::string& s) {
    const std::string t = trim(s);
    if (t.empty()) return 0;
    if (t == "Infinity" || t == "+Infinity") return INFINITY;
    if (t == "-Infinity") return -INFINITY;
    if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
        char* end = nullptr;
        const double d = double(std::strtoull(t.c_str() + 2, &end, 16));
        return *end ? NAN : d;
    }
    for (char c : t)
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
              c == '+' || c == '-'))
            return NAN;
    char* end = nullptr;
    const double d = std::strtod(t.c_str(), &end);
    return *end ? NAN : d;
}

}  // namespace

bool strict_equal(const Value& a, const Value& b) {
    const JsType ta = js_type(a), tb = js_type(b);
    if (ta != tb) return false;
    switch (ta) {
        case JsType::Undefined:
        case JsType::Null:
            return true;
        case JsType::Bool:
            return a.boolean == b.boolean;
        case JsType::Number:
            return a.num == b.num;
        case JsType::String:
            return a.str() == b.str();
        case JsType::Ref:
            return identity(a) == identity(b);
    }
    return false;
}

bool loose_equal(const Value& a, const Value& b) {
    const JsType ta = js_type(a), tb = js_type(b);
    if (ta == tb) return strict_equal(a, b);
    const bool a_nullish = ta == JsType::Undefined || ta == JsType::Null;
    const bool b_nullish = tb == JsType::Undefined || tb == JsType::Null;
    if (a_nullish || b_nullish) return a_nullish && b_nullish;
    if (ta == JsType::Bool) return loose_equal(Value::integer(a.boolean ? 1 : 0), b);
    if (tb == JsType::Bool) return loose_equal(a, Value::integer(b.boolean ? 1 : 0));
    if (ta == JsType::Number && tb == JsType::String) return a.num == js_to_number(b.str());
    if (ta == JsType::String && tb == JsType::Number) return js_to_number(a.str()) == b.num;
    if (ta == JsType::Ref && tb != JsType::Ref) return loose_equal(Value::string(a.js_string()), b);
    if (tb == JsType::Ref && ta != JsType::Ref) return loose_equal(a, Value::string(b.js_string()));
    return false;
}

std::string json_quote(const std::string& s, bool ensure_ascii) {
    std::string out = "\"";
    static const char* hex = "0123456789abcdef";
    auto u_escape = [&](unsigned u) {
        out += "\\u";
        for (int sh = 12; sh >= 0; sh -= 4) out += hex[(u >> sh) & 0xf];
    };
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            switch (c) {
                case '"':
                    out += "\\\"";
                    break;
                case '\\':
                    out += "\\\\";
                    break;
                case '\b':
                    out += "\\b";
                    break;
                case '\f':
                    out += "\\f";
                    break;
                case '\n':
                    out += "\\n";
                    break;
                case '\r':
                    out += "\\r";
                    break;
                case '\t':
                    out += "\\t";
                    break;
                default:
                    if (c < 0x20 || (ensure_ascii && c == 0x7f))
                        u_escape(c);
                    else
                        out += char(c);
            }
            ++i;
            continue;
        }
        size_t n = 1;
        const unsigned cp = decode_utf8(s, i, &n);
        if (ensure_ascii) {
            if (cp >= 0x10000) {
                u_escape(0xd800 + ((cp - 0x10000) >> 10));
                u_escape(0xdc00 + ((cp - 0x10000) & 0x3ff));
            } else {
                u_escape(cp);
            }
        } else {
            out.append(s, i, n);
        }
        i += n;
    }
    return out + "\"";
}

namespace {

// ICU-like ordering for sort_keys (String.prototype.localeCompare): punctuation, digits, then
// letters case-insensitively, lower case first on a tie.
int locale_compare(const std::string& a, const std::string& b) {
    auto cls = [](unsigned char c) { return std::isalpha(c) ? 2 : std::isdigit(c) ? 1 : 0; };
    const size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        const unsigned char x = a[i], y = b[i];
        if (cls(x) != cls(y)) return cls(x) < cls(y) ? -1 : 1;
        const int lx = std::tolower(x), ly = std::tolower(y);
        if (lx != ly) return lx < ly ? -1 : 1;
    }
    if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) return std::islower(static_cast<unsigned char>(a[i])) ? -1 : 1;
    return 0;
}

}  // namespace

namespace {

// to_json's writer: appends to one buffer, checking its size after every piece.
struct JsonWriter {
    const JsonOptions& opt;
    bool undefined_as_null;
    std::string out;
    std::string item_sep, key_sep, unit;

    void put(std::string_view piece) {
        if (out.size() + piece.size() > opt.max_len)
            throw std::runtime_error("text longer than the limit of " +
                                     std::to_string(opt.max_len) + " bytes");
        out += piece;
    }
    void newline(int depth) {
        put("\n");
        for (int i = 0; i < depth; ++i) put(unit);
    }
    void write(const Value& v, int depth);
};

void JsonWriter::write(const Value& v, int depth) {
    if (depth > opt.max_depth)
        throw std::runtime_error("value nested deeper than the limit of " +
                                 std::to_string(opt.max_depth) + " levels");
    switch (v.kind) {
        case Kind::Null:
            return put("null");
        case Kind::Undefined:
            return put(undefined_as_null ? "null" : "undefined");
        case Kind::Bool:
            return put(v.boolean ? "true" : "false");
        case Kind::Int:
        case Kind::Float:
            return put(std::isfinite(v.num) ? js_number(v.num) : "null");
        case Kind::String:
            return put(json_quote(v.str(), opt.ensure_ascii));
        case Kind::Function:
            throw std::runtime_error("Cannot convert to JSON: FunctionValue");
        default:
            break;
    }
    const bool is_array = v.kind == Kind::Array;
    std::vector<const std::pair<std::string, Value>*> entries;
    if (!is_array) {
        for (const auto& kv : v.obj->items) entries.push_back(&kv);
        if (opt.sort_keys)
            std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) {
                return locale_compare(a->first, b->first) < 0;
            });
    }
    const size_t n = is_array ? v.arr->size() : entries.size();
    put(is_array ? "[" : "{");
    for (size_t i = 0; i < n; ++i) {
        if (i) put(item_sep);
        if (opt.indent) newline(depth + 1);
        if (is_array) {
            write((*v.arr)[i], depth + 1);
        } else {
            put(json_quote(entries[i]->first, opt.ensure_ascii));
            put(key_sep);
            write(entries[i]->second, depth + 1);
        }
    }
    if (opt.indent && n) newline(depth);
    put(is_array ? "]" : "}");
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_as_null) {
    JsonWriter w{opt, undefined_as_null, {}, opt.indent ? "," : ", ", ": ", {}};
    if (opt.has_separators) {
        w.item_sep = opt.item_sep;
        w.key_sep = opt.key_sep;
    }
    if (opt.indent > 0) w.unit = std::string(size_t(opt.indent), ' ');
    w.write(v, 0);
    return std::move(w.out);
}

namespace {

bool array_index_key(const std::string& k, unsigned long long* n) {
    if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
    for (char c : k)
        if (c < '0' || c > '9') return false;
    *n = std::stoull(k);
    return *n < 4294967295ull;
}

template <class J>
Value convert(const J& j, int depth) {
    if (depth > 512) throw std::runtime_error("chat template context nested too deeply");
    switch (j.type()) {
        case nlohmann::json::value_t::null:
            return Value::null();
        case nlohmann::json::value_t::boolean:
            return Value::from_bool(j.template get<bool>());
        case nlohmann::json::value_t::number_integer:
            return Value::integer(double(j.template get<long long>()));
        case nlohmann::json::value_t::number_unsigned:
            return Value::integer(double(j.template get<unsigned long long>()));
        case nlohmann::json::value_t::number_float: {
            const double d = j.template get<double>();
            return std::isfinite(d) && std::floor(d) == d ? Value::integer(d) : Value::floating(d);
        }
        case nlohmann::json::value_t::string:
            return Value::string(j.template get<std::string>());
        case nlohmann::json::value_t::array: {
            Array a;
            a.reserve(j.size());
            for (const auto& x : j) a.push_back(convert(x, depth + 1));
            return Value::array(std::move(a));
        }
        case nlohmann::json::value_t::object: {
            Value o = Value::object();
            std::vector<std::pair<unsigned long long, std::string>> indices;
            for (auto it = j.begin(); it != j.end(); ++it) {
                unsigned long long n = 0;
                if (array_index_key(it.key(), &n)) indices.emplace_back(n, it.key());
            }
            std::sort(indices.begin(), indices.end());
            for (const auto& [n, key] : indices) o.obj->set(key, convert(j.at(key), depth + 1));
            for (auto it = j.begin(); it != j.end(); ++it) {
                unsigned long long n = 0;
                if (!array_index_key(it.key(), &n))
                    o.obj->items.emplace_back(it.key(), convert(it.value(), depth + 1));
            }
            return o;
        }
        default:
            return Value::undefined();  // binary and discarded values
    }
}

}  // namespace

Value from_json(const nlohmann::json& j) {
    return convert(j, 0);
}
Value from_json(const nlohmann::ordered_json& j) {
    return convert(j, 0);
}

}  // namespace specula::jinja
