// The run-time values of the Jinja engine, modelled on @huggingface/jinja's: undefined, none,
// booleans, integers and floats (both JavaScript doubles, so arithmetic and printing match the
// reference), strings (UTF-8), arrays and tuples, objects (insertion-ordered), namespaces and
// functions. Arrays, objects and namespaces are shared by reference, as in JavaScript, so
// `ns.x = ...` and `list.append(...)` are seen through every name. Conversion from nlohmann JSON
// (ordered or not) follows JSON.parse + the reference's conversion: an integral number is an
// integer, keys that look like array indices come first (JavaScript object order).
//
// What a template controls stays bounded: a string is shared, immutable Text (copying a value
// never copies its bytes; indexing a code point is O(1) after one pass), destroying a value
// nested however deep (a list in a list in a list ... 300,000 levels) runs in a loop, never a
// recursion on the C stack, and to_json refuses values nested deeper than its max_depth. New
// strings, lists and object entries are charged to the render running on this thread
// (interpreter.h: its byte budget), when there is one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace specula::jinja {

class Interpreter;
struct Env;
struct Value;

using Array = std::vector<Value>;
struct Object;
using Kwargs = std::vector<std::pair<std::string, Value>>;
// A callable: positional arguments, keyword arguments, the interpreter and the caller's scope.
using Function = std::function<Value(std::vector<Value>& args, Kwargs& kwargs, Interpreter& in,
                                     const std::shared_ptr<Env>& call_env)>;

enum class Kind { Undefined, Null, Bool, Int, Float, String, Array, Object, Namespace, Function };

// The bytes of a string value, shared by every value holding it. Code points are counted and
// located once (on first use) for a string that is not ASCII, so s[i] and slices cost O(1) per
// code point instead of a decode of the whole string.
struct Text {
    std::string bytes;
    explicit Text(std::string b) : bytes(std::move(b)) {}
    size_t code_point_count() const;
    // Bytes [begin, end) of code points [first, last) (last <= code_point_count()).
    std::pair<size_t, size_t> code_point_span(size_t first, size_t last) const;

  private:
    void index() const;
    mutable bool indexed_ = false, ascii_ = false;
    mutable std::vector<uint32_t> starts_;  // byte offset of each code point, then the size
};

struct Value {
    Kind kind = Kind::Undefined;
    bool boolean = false;
    bool tuple = false;  // an Array written as a tuple literal
    // Containers: the nesting of the list/object when this value was made (1 + its deepest
    // item's), checked against the render's max_value_depth on creation. A container filled
    // later (append, a namespace's attribute) may hold deeper items: walks check as they go.
    uint32_t depth = 0;
    double num = 0;                    // Int and Float (JavaScript numbers)
    std::shared_ptr<const Text> text;  // String
    std::shared_ptr<Array> arr;
    std::shared_ptr<Object> obj;  // Object and Namespace
    std::shared_ptr<Function> fn;

    Value() = default;
    Value(const Value&) = default;
    Value(Value&&) noexcept = default;
    Value& operator=(const Value&) = default;
    Value& operator=(Value&&) noexcept = default;
    // Frees what only this value holds without recursing (see value.cpp: release_nested).
    ~Value() {
        if ((arr && arr.use_count() == 1) || (obj && obj.use_count() == 1)) release_nested();
    }

    // The string's bytes ("" for a value that is not a string).
    const std::string& str() const;

    static Value undefined() { return {}; }
    static Value null() {
        Value v;
        v.kind = Kind::Null;
        return v;
    }
    static Value from_bool(bool b) {
        Value v;
        v.kind = Kind::Bool;
        v.boolean = b;
        return v;
    }
    static Value integer(double n) {
        Value v;
        v.kind = Kind::Int;
        v.num = n;
        return v;
    }
    static Value floating(double n) {
        Value v;
        v.kind = Kind::Float;
        v.num = n;
        return v;
    }
    static Value string(std::string s);  // charged to the running render
    static Value array(Array a = {}, bool tuple = false);
    static Value object();
    static Value namespace_();
    static Value function(Function f);

    bool is_undefined() const { return kind == Kind::Undefined; }
    bool is_null() const { return kind == Kind::Null; }
    bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
    bool is_numeric_like() const { return is_number() || kind == Kind::Bool; }
    double numeric() const { return kind == Kind::Bool ? (boolean ? 1 : 0) : num; }
    bool is_mapping() const { return kind == Kind::Object; }
    bool is_container() const { return kind == Kind::Object || kind == Kind::Namespace; }

    // Python/Jinja truthiness as the reference computes it (a namespace is always true).
    bool truthy() const;
    // What {{ value }} prints (none and undefined print nothing: the caller skips them).
    std::string to_output() const;
    // JavaScript's String(value.value): used by `+`, `~`, join and the like.
    std::string js_string() const;
    const char* type_name() const;

  private:
    void release_nested() noexcept;
};

struct Object {
    std::vector<std::pair<std::string, Value>> items;
    const Value* find(const std::string& key) const;
    Value* find(const std::string& key);
    void set(const std::string& key, Value v);
};

// JavaScript's Number.prototype.toString (shortest round trip, exponent past 1e21 / under 1e-6).
std::string js_number(double v);
// FloatValue.toString: integral values keep one decimal ("1.0"), -0 prints "-0.0".
std::string float_string(double v);

// JavaScript loose (==) and strict (===) equality of the values' payloads (none equals undefined:
// the reference's none holds JavaScript's undefined).
bool loose_equal(const Value& a, const Value& b);
bool strict_equal(const Value& a, const Value& b);

Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

// Containers nested deeper than this are refused by every walk over a value (tojson, printing).
constexpr int kMaxValueDepth = 512;

// Charges `bytes` of new values to the render running on this thread (interpreter.cpp), which
// throws Error naming its byte budget once it is spent; nothing when no render runs.
void charge_allocation(size_t bytes);
// Checks a new container's nesting against the running render's max_value_depth (an Error
// naming the limit past it); nothing when no render runs.
void check_value_depth(uint32_t depth);

struct JsonOptions {
    int indent = 0;  // 0: one line
    bool ensure_ascii = false;
    bool sort_keys = false;
    bool has_separators = false;
    std::string item_sep, key_sep;
    size_t max_len =
        size_t(64) << 20;            // longer text throws (shared sub-lists can nest exponentially)
    int max_depth = kMaxValueDepth;  // deeper nesting throws
};
// JSON.stringify-compatible text of `v` as the reference's toJSON writes it; undefined becomes
// null when `undefined_as_null`, else the word undefined. Throws std::runtime_error naming the
// limit for text past max_len or nesting past max_depth, and for a function. Written into one
// buffer as it goes: the work is bounded by max_len whatever the value's shape.
std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_as_null = true);
// A JSON string literal as JSON.stringify writes it (optionally ASCII-only).
std::string json_quote(const std::string& s, bool ensure_ascii);

}  // namespace specula::jinja
