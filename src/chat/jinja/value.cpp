#include "chat/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja/unicode.h"

namespace specula::jinja {

Value Value::array(Array a, bool tuple) {
    Value v;
    v.kind = Kind::Array;
    v.tuple = tuple;
    v.arr = std::make_shared<Array>(std::move(a));
    return v;
}

Value Value::object() {
    Value v;
    v.kind = Kind::Object;
    v.obj = std::make_shared<Object>();
    return v;
}

Value Value::namespace_() {
    Value v;
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
    if (Value* old = find(key))
        *old = std::move(v);
    else
        items.emplace_back(key, std::move(v));
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
            return !str.empty();
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
            return str;
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
            return a.str == b.str;
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
    if (ta == JsType::Number && tb == JsType::String) return a.num == js_to_number(b.str);
    if (ta == JsType::String && tb == JsType::Number) return js_to_number(a.str) == b.num;
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

std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_as_null, int depth) {
    if (depth > 512) throw std::runtime_error("tojson: value nested too deeply");
    std::string item_sep = opt.indent ? "," : ", ", key_sep = ": ";
    if (opt.has_separators) {
        item_sep = opt.item_sep;
        key_sep = opt.key_sep;
    }
    switch (v.kind) {
        case Kind::Null:
            return "null";
        case Kind::Undefined:
            return undefined_as_null ? "null" : "undefined";
        case Kind::Bool:
            return v.boolean ? "true" : "false";
        case Kind::Int:
        case Kind::Float:
            return std::isfinite(v.num) ? js_number(v.num) : "null";
        case Kind::String:
            return json_quote(v.str, opt.ensure_ascii);
        case Kind::Function:
            throw std::runtime_error("Cannot convert to JSON: FunctionValue");
        default:
            break;
    }
    const std::string unit = opt.indent > 0 ? std::string(size_t(opt.indent), ' ') : "";
    std::string base = "\n";
    for (int i = 0; i < depth; ++i) base += unit;
    const std::string child = base + unit;
    std::vector<std::string> core;
    if (v.kind == Kind::Array) {
        size_t total = 0;
        for (const Value& x : *v.arr) {
            core.push_back(to_json(x, opt, undefined_as_null, depth + 1));
            total += core.back().size() + child.size();
            if (total > opt.max_len) throw std::runtime_error("tojson: text longer than the limit");
        }
        std::string out = "[";
        if (opt.indent && !core.empty()) {
            out += child;
            for (size_t i = 0; i < core.size(); ++i) out += (i ? item_sep + child : "") + core[i];
            return out + base + "]";
        }
        for (size_t i = 0; i < core.size(); ++i) out += (i ? item_sep : "") + core[i];
        return out + "]";
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    size_t total = 0;
    for (const auto& kv : v.obj->items) entries.push_back(&kv);
    if (opt.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return locale_compare(a->first, b->first) < 0; });
    for (const auto* kv : entries) {
        std::string s = json_quote(kv->first, opt.ensure_ascii) + key_sep +
                        to_json(kv->second, opt, undefined_as_null, depth + 1);
        core.push_back(opt.indent ? child + s : s);
        total += core.back().size();
        if (total > opt.max_len) throw std::runtime_error("tojson: text longer than the limit");
    }
    std::string out = "{";
    for (size_t i = 0; i < core.size(); ++i) out += (i ? item_sep : "") + core[i];
    return out + (opt.indent && !core.empty() ? base + "}" : "}");
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
