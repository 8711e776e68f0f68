// The run-time values of the Jinja engine, modelled on @huggingface/jinja's: undefined, none,
// booleans, integers and floats (both JavaScript doubles, so arithmetic and printing match the
// reference), strings (UTF-8), arrays and tuples, objects (insertion-ordered), namespaces and
// functions. Arrays, objects and namespaces are shared by reference, as in JavaScript, so
// `ns.x = ...` and `list.append(...)` are seen through every name. Conversion from nlohmann JSON
// (ordered or not) follows JSON.parse + the reference's conversion: an integral number is an
// integer, keys that look like array indices come first (JavaScript object order).
#pragma once

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

struct Value {
    Kind kind = Kind::Undefined;
    bool boolean = false;
    bool tuple = false;  // an Array written as a tuple literal
    double num = 0;      // Int and Float (JavaScript numbers)
    std::string str;
    std::shared_ptr<Array> arr;
    std::shared_ptr<Object> obj;  // Object and Namespace
    std::shared_ptr<Function> fn;

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
    static Value string(std::string s) {
        Value v;
        v.kind = Kind::String;
        v.str = std::move(s);
        return v;
    }
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

struct JsonOptions {
    int indent = 0;  // 0: one line
    bool ensure_ascii = false;
    bool sort_keys = false;
    bool has_separators = false;
    std::string item_sep, key_sep;
    size_t max_len =
        size_t(64) << 20;  // longer text throws (shared sub-lists can nest exponentially)
};
// JSON.stringify-compatible text of `v` as the reference's toJSON writes it; undefined becomes
// null when `undefined_as_null`, else the word undefined. Throws Error for a function.
std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_as_null = true,
                    int depth = 0);
// A JSON string literal as JSON.stringify writes it (optionally ASCII-only).
std::string json_quote(const std::string& s, bool ensure_ascii);

}  // namespace specula::jinja
