// Methods and properties reached with a dot: on strings those @huggingface/jinja has (upper,
// lower, strip, lstrip, rstrip, title, capitalize, startswith, endswith, split, replace and the
// length property; like the reference, strip/lstrip/rstrip ignore a chars argument and trim
// whitespace) plus Python's find, rfind, count, index, splitlines, join, format, isdigit,
// isalpha, isalnum, isspace, islower, isupper, removeprefix, removesuffix; on objects get,
// items, keys, values, dictsort; on lists the length property plus append, pop, insert, extend,
// index and count.
#include <algorithm>
#include <cmath>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/text_ops.h"
#include "chat/jinja/unicode.h"

namespace specula::jinja {

namespace {

using Impl = std::function<Value(std::vector<Value>&, Kwargs&, Interpreter&)>;

Value method(Impl f) {
    return Value::function(
        [f = std::move(f)](std::vector<Value>& args, Kwargs& kwargs, Interpreter& in,
                           const std::shared_ptr<Env>&) { return f(args, kwargs, in); });
}

Value strings(const std::vector<std::string>& parts) {
    Array a;
    a.reserve(parts.size());
    for (const auto& p : parts) a.push_back(Value::string(p));
    return Value::array(std::move(a));
}

// Occurrences of `sep` in `s` (non-overlapping), counted without building the parts.
size_t occurrences(const std::string& s, const std::string& sep) {
    size_t n = 0;
    for (size_t p = find_text(s, sep); p != std::string::npos;
         p = find_text(s, sep, p + sep.size()))
        ++n;
    return n;
}

size_t code_point_count(std::string_view s) {
    size_t n = 0;
    for (size_t i = 0; i < s.size(); i += utf8_len(s, i)) ++n;
    return n;
}

bool all_chars(const std::string& s, int (*pred)(int)) {
    if (s.empty()) return false;
    for (unsigned char c : s)
        if (!pred(c)) return false;
    return true;
}

// Python str.format: {} and {0} positional, {name} keyword; {{ and }} are braces.
std::string py_format(const std::string& f, const std::vector<Value>& args, const Kwargs& kwargs,
                      Interpreter& in) {
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') {
            out += '{';
            ++i;
        } else if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') {
            out += '}';
            ++i;
        } else if (f[i] == '{') {
            const size_t close = f.find('}', i);
            if (close == std::string::npos) in.error("format: single '{' in format string");
            std::string field = f.substr(i + 1, close - i - 1);
            field = field.substr(0, field.find(':'));
            const Value* v = nullptr;
            if (field.empty()) {
                if (next < args.size()) v = &args[next++];
            } else if (auto n = parse_int(field);
                       n && field.find_first_not_of("0123456789") == std::string::npos) {
                if (*n < double(args.size())) v = &args[size_t(*n)];
            } else {
                for (const auto& kv : kwargs)
                    if (kv.first == field) v = &kv.second;
            }
            if (!v) in.error("format: no argument for {" + field + "}");
            out += v->to_output();
            i = close;
        } else {
            out += f[i];
        }
        in.check_size(out.size());
    }
    return out;
}

double index_arg(const std::vector<Value>& args, size_t i, double dflt) {
    return i < args.size() && args[i].is_number() ? args[i].num : dflt;
}

// One call of a string's method: the string, the method's name as written and its arguments.
struct StringCall {
    const std::string& s;
    const std::string& name;
    std::vector<Value>& args;
    Kwargs& kwargs;
    Interpreter& in;
};

Value sm_upper(const StringCall& c) {
    return Value::string(to_upper(c.s));
}
Value sm_lower(const StringCall& c) {
    return Value::string(to_lower(c.s));
}
Value sm_strip(const StringCall& c) {
    return Value::string(trim(c.s));
}
Value sm_lstrip(const StringCall& c) {
    return Value::string(trim_start(c.s));
}
Value sm_rstrip(const StringCall& c) {
    return Value::string(trim_end(c.s));
}
Value sm_title(const StringCall& c) {
    return Value::string(title_case(c.s));
}
Value sm_capitalize(const StringCall& c) {
    return Value::string(capitalize(c.s));
}

// startswith and endswith: a string or a tuple of strings.
Value sm_startswith(const StringCall& c) {
    const std::string& s = c.s;
    const bool start = c.name == "startswith";
    if (c.args.empty()) c.in.error(c.name + "() requires at least one argument");
    auto test = [&](const std::string& p) {
        return p.size() <= s.size() && (start ? s.compare(0, p.size(), p) == 0
                                              : s.compare(s.size() - p.size(), p.size(), p) == 0);
    };
    const Value& a = c.args[0];
    if (a.kind == Kind::String) return Value::from_bool(test(a.str()));
    if (a.kind == Kind::Array) {
        for (const Value& v : *a.arr) {
            if (v.kind != Kind::String) c.in.error(c.name + "() tuple elements must be strings");
            if (test(v.str())) return Value::from_bool(true);
        }
        return Value::from_bool(false);
    }
    c.in.error(c.name + "() argument must be a string or tuple of strings");
}

Value sm_split(const StringCall& c) {
    c.in.search_work(c.s.size());
    Value sep = c.args.size() > 0 ? c.args[0] : Value::null();
    Value maxsplit = c.args.size() > 1 ? c.args[1] : Value::integer(-1);
    for (const auto& kv : c.kwargs) {
        if (kv.first == "sep") sep = kv.second;
        if (kv.first == "maxsplit") maxsplit = kv.second;
    }
    if (sep.kind != Kind::String && !sep.is_null())
        c.in.error("sep argument must be a string or null");
    if (maxsplit.kind != Kind::Int) c.in.error("maxsplit argument must be a number");
    // The parts are counted before they are made: a list past the limit is never built.
    const double most = maxsplit.num < 0 ? 1e300 : maxsplit.num + 1;
    if (sep.is_null()) {
        c.in.check_items(size_t(std::min(double(count_words(c.s)), most)));
        return strings(split_whitespace(c.s, maxsplit.num));
    }
    if (sep.str().empty()) c.in.error("empty separator");
    c.in.check_items(size_t(std::min(double(occurrences(c.s, sep.str()) + 1), most)));
    return strings(split_on(c.s, sep.str(), maxsplit.num));
}

// The replace filter's.
Value sm_replace(const StringCall& c) {
    std::vector<Value> a = c.args;
    Value fn = Value::string(c.s);
    return c.in.apply_filter(fn, "replace", a, c.kwargs, true, nullptr);
}

Value sm_splitlines(const StringCall& c) {
    const std::string& s = c.s;
    size_t breaks = 0;
    for (char ch : s) breaks += ch == '\n' || ch == '\r';
    c.in.check_items(breaks + 1);
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
            lines.push_back(s.substr(start, i - start));
            if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
            start = i + 1;
        }
    }
    if (start < s.size()) lines.push_back(s.substr(start));
    return strings(lines);
}

// find, rfind, index and count: positions in code points.
Value sm_find(const StringCall& c) {
    const std::string& s = c.s;
    if (c.args.empty() || c.args[0].kind != Kind::String)
        c.in.error(c.name + "() needs a string argument");
    c.in.search_work(s.size());
    const std::string& sub = c.args[0].str();
    if (c.name == "count") {
        if (sub.empty()) return Value::integer(double(code_point_count(s) + 1));
        return Value::integer(double(occurrences(s, sub)));
    }
    const size_t p = c.name == "rfind" ? rfind_text(s, sub) : find_text(s, sub);
    if (p == std::string::npos) {
        if (c.name == "index") c.in.error("substring not found");
        return Value::integer(-1);
    }
    return Value::integer(double(code_point_count(std::string_view(s).substr(0, p))));
}

Value sm_join(const StringCall& c) {
    if (c.args.empty() || c.args[0].kind != Kind::Array) c.in.error("join() needs a list");
    const Array& items = *c.args[0].arr;
    c.in.tick(items.size());
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        out += (i ? c.s : "") + items[i].js_string();
        c.in.check_size(out.size());
    }
    return Value::string(out);
}

Value sm_format(const StringCall& c) {
    return Value::string(py_format(c.s, c.args, c.kwargs, c.in));
}

// removeprefix and removesuffix.
Value sm_remove(const StringCall& c) {
    const std::string& s = c.s;
    if (c.args.empty() || c.args[0].kind != Kind::String)
        c.in.error("removeprefix/removesuffix need a string");
    const std::string& p = c.args[0].str();
    if (p.size() > s.size()) return Value::string(s);
    if (c.name == "removeprefix")
        return Value::string(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
    return Value::string(
        s.compare(s.size() - p.size(), p.size(), p) == 0 ? s.substr(0, s.size() - p.size()) : s);
}

// isdigit, isalpha, isalnum, isspace: every byte of a non-empty string.
template <int (*pred)(int)>
Value sm_all(const StringCall& c) {
    return Value::from_bool(all_chars(c.s, pred));
}

// islower and isupper: some cased letter, none of the other case.
Value sm_iscase(const StringCall& c) {
    const bool lower = c.name == "islower";
    bool cased = false;
    for (unsigned char ch : c.s) {
        if (std::isalpha(ch)) cased = true;
        if (lower ? std::isupper(ch) : std::islower(ch)) return Value::from_bool(false);
    }
    return Value::from_bool(cased);
}

struct StringMethod {
    const char* name;
    Value (*fn)(const StringCall&);
};

constexpr StringMethod kStringMethods[] = {
    {"upper", sm_upper},
    {"lower", sm_lower},
    {"strip", sm_strip},
    {"lstrip", sm_lstrip},
    {"rstrip", sm_rstrip},
    {"title", sm_title},
    {"capitalize", sm_capitalize},
    {"startswith", sm_startswith},
    {"endswith", sm_startswith},
    {"split", sm_split},
    {"replace", sm_replace},
    {"splitlines", sm_splitlines},
    {"find", sm_find},
    {"rfind", sm_find},
    {"index", sm_find},
    {"count", sm_find},
    {"join", sm_join},
    {"format", sm_format},
    {"removeprefix", sm_remove},
    {"removesuffix", sm_remove},
    {"isdigit", sm_all<::isdigit>},
    {"isalpha", sm_all<::isalpha>},
    {"isalnum", sm_all<::isalnum>},
    {"isspace", sm_all<::isspace>},
    {"islower", sm_iscase},
    {"isupper", sm_iscase},
};

// The property `length`, or a method of kStringMethods bound to the string (its shared Text:
// never a copy of the bytes); undefined otherwise. Reaching one costs work over the bytes.
Value string_member(const Value& self, const std::string& name, Interpreter& in) {
    in.work(self.str().size());
    if (name == "length") return Value::integer(double(utf16_length(self.str())));
    for (const StringMethod& m : kStringMethods)
        if (name == m.name)
            return method([text = self.text, name, fn = m.fn](std::vector<Value>& args,
                                                              Kwargs& kwargs, Interpreter& in) {
                return fn(StringCall{text->bytes, name, args, kwargs, in});
            });
    return Value::undefined();
}

Value object_member(const Value& self, const std::string& name) {
    const auto obj = self.obj;
    if (name == "get") {
        return method([obj](std::vector<Value>& args, Kwargs&, Interpreter& in) {
            if (args.empty() || args[0].kind != Kind::String)
                in.error(std::string("object key must be a string: got ") +
                         (args.empty() ? "UndefinedValue" : args[0].type_name()));
            in.tick(obj->items.size() / 16);
            if (const Value* v = obj->find(args[0].str())) return *v;
            return args.size() > 1 ? args[1] : Value::null();
        });
    }
    if (name == "items" || name == "keys" || name == "values") {
        return method([obj, name](auto&, auto&, Interpreter& in) {
            Array out;
            in.tick(obj->items.size());
            for (const auto& kv : obj->items) {
                if (name == "items")
                    out.push_back(Value::array({Value::string(kv.first), kv.second}));
                else
                    out.push_back(name == "keys" ? Value::string(kv.first) : kv.second);
            }
            return Value::array(std::move(out));
        });
    }
    if (name == "dictsort") {
        return method([obj](std::vector<Value>& args, Kwargs& kwargs, Interpreter& in) {
            auto get = [&](size_t i, const char* key, Value dflt) {
                if (i < args.size()) return args[i];
                for (const auto& kv : kwargs)
                    if (kv.first == key) return kv.second;
                return dflt;
            };
            const Value cs = get(0, "case_sensitive", Value::from_bool(false));
            const Value by = get(1, "by", Value::string("key"));
            const Value rev = get(2, "reverse", Value::from_bool(false));
            if (cs.kind != Kind::Bool) in.error("case_sensitive must be a boolean");
            if (by.kind != Kind::String || (by.str() != "key" && by.str() != "value"))
                in.error("by must be either 'key' or 'value'");
            if (rev.kind != Kind::Bool) in.error("reverse must be a boolean");
            Array items;
            for (const auto& kv : obj->items)
                items.push_back(Value::array({Value::string(kv.first), kv.second}));
            const size_t idx = by.str() == "key" ? 0 : 1;
            in.tick(items.size() * 8);
            try {
                std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
                    const int c = compare_values((*a.arr)[idx], (*b.arr)[idx], cs.boolean);
                    return rev.boolean ? c > 0 : c < 0;
                });
            } catch (const std::runtime_error& e) {
                in.error(e.what());
            }
            return Value::array(std::move(items));
        });
    }
    return Value::undefined();
}

Value array_member(const Value& self, const std::string& name) {
    const auto arr = self.arr;
    if (name == "length") return Value::integer(double(arr->size()));
    if (name == "append" || name == "extend") {
        const bool extend = name == "extend";
        return method([arr, extend](std::vector<Value>& args, Kwargs&, Interpreter& in) {
            if (args.empty()) in.error("append/extend need an argument");
            in.track(arr);
            if (!extend) {
                in.check_items(arr->size() + 1);
                in.charge(sizeof(Value));
                arr->push_back(args[0].arr == arr ? Value::array(*arr)
                                                  : args[0]);  // no reference cycles
                return Value::null();
            }
            if (args[0].kind != Kind::Array) in.error("extend() needs a list");
            const Array add = *args[0].arr;
            in.check_items(arr->size() + add.size());
            in.tick(add.size());
            in.charge(add.size() * sizeof(Value));
            arr->insert(arr->end(), add.begin(), add.end());
            return Value::null();
        });
    }
    if (name == "pop") {
        return method([arr](std::vector<Value>& args, Kwargs&, Interpreter& in) {
            if (arr->empty()) in.error("pop from empty list");
            double i = index_arg(args, 0, -1);
            if (i < 0) i += double(arr->size());
            if (i < 0 || i >= double(arr->size())) in.error("pop index out of range");
            Value v = (*arr)[size_t(i)];
            arr->erase(arr->begin() + long(i));
            return v;
        });
    }
    if (name == "insert") {
        return method([arr](std::vector<Value>& args, Kwargs&, Interpreter& in) {
            if (args.size() < 2) in.error("insert() needs an index and a value");
            in.track(arr);
            double i = std::trunc(index_arg(args, 0, 0));
            if (i < 0) i = std::max(0.0, i + double(arr->size()));
            i = std::min(i, double(arr->size()));
            in.check_items(arr->size() + 1);
            in.charge(sizeof(Value));
            arr->insert(arr->begin() + long(i), args[1].arr == arr ? Value::array(*arr) : args[1]);
            return Value::null();
        });
    }
    if (name == "index" || name == "count") {
        const bool count = name == "count";
        return method([arr, count](std::vector<Value>& args, Kwargs&, Interpreter& in) {
            if (args.empty()) in.error("index/count need an argument");
            in.tick(arr->size());
            double n = 0;
            for (size_t i = 0; i < arr->size(); ++i)
                if (loose_equal((*arr)[i], args[0]) && (*arr)[i].kind == args[0].kind) {
                    if (!count) return Value::integer(double(i));
                    ++n;
                }
            if (!count) in.error("value is not in list");
            return Value::integer(n);
        });
    }
    return Value::undefined();
}

}  // namespace

Value builtin_member(const Value& object, const std::string& name, Interpreter& in) {
    switch (object.kind) {
        case Kind::String:
            return string_member(object, name, in);
        case Kind::Object:
            return object_member(object, name);
        case Kind::Array:
            return array_member(object, name);
        default:
            return Value::undefined();
    }
}

}  // namespace specula::jinja
