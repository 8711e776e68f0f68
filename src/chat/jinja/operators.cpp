// Binary operators and slicing with @huggingface/jinja's semantics: JavaScript number
// arithmetic (an integer result stays an integer, `/` is always a float, `%` keeps the dividend's
// sign), `+` concatenating strings or lists, `~` stringifying both sides (undefined as ""), `in`
// over strings, lists (strict equality) and object keys, and JavaScript's loose `==`; plus,
// unlike the reference, ordering comparisons between strings. Also the value ordering sort uses.
#include <algorithm>
#include <cmath>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/text_ops.h"
#include "chat/jinja/unicode.h"

namespace specula::jinja {

Value Interpreter::binary(const Ast& n, const std::shared_ptr<Env>& env) {
    const std::string& op = n.str;
    Value l = eval(*n.a, env);
    if (op == "and") return l.truthy() ? eval(*n.b, env) : l;
    if (op == "or") return l.truthy() ? l : eval(*n.b, env);
    Value r = eval(*n.b, env);
    at_ = n.offset;
    if (l.text || r.text) work(l.str().size() + r.str().size());
    if (op == "==") return Value::from_bool(loose_equal(l, r));
    if (op == "!=") return Value::from_bool(!loose_equal(l, r));
    auto str_concat = [&](const std::string& a, const std::string& b) {
        check_size(a.size() + b.size());
        std::string out;
        out.reserve(a.size() + b.size());
        out += a;
        out += b;
        return Value::string(std::move(out));
    };
    if (l.is_number() && r.is_number() && op != "~" && op != "**") {
        const double a = l.num, b = r.num;
        const bool fl = l.kind == Kind::Float || r.kind == Kind::Float;
        auto num = [&](double x) { return fl ? Value::floating(x) : Value::integer(x); };
        if (op == "+") return num(a + b);
        if (op == "-") return num(a - b);
        if (op == "*") return num(a * b);
        if (op == "/") return Value::floating(a / b);
        if (op == "//") return num(std::floor(a / b));
        if (op == "%") return num(std::fmod(a, b));
        if (op == "<") return Value::from_bool(a < b);
        if (op == ">") return Value::from_bool(a > b);
        if (op == "<=") return Value::from_bool(a <= b);
        if (op == ">=") return Value::from_bool(a >= b);
    } else if (l.is_undefined() || r.is_undefined()) {
        if (r.is_undefined() && (op == "in" || op == "not in"))
            return Value::from_bool(op == "not in");
        if (op == "~" && !l.is_null() && !r.is_null())
            return str_concat(l.is_undefined() ? "" : l.js_string(),
                              r.is_undefined() ? "" : r.js_string());
        error("cannot perform operation " + op + " on undefined values");
    } else if (l.is_null() || r.is_null()) {
        error("cannot perform operation " + op + " on null values");
    } else if (op == "~") {
        if (l.text && r.text) return str_concat(l.str(), r.str());  // no copies first
        return str_concat(l.js_string(), r.js_string());
    } else if (op == "**" && l.is_numeric_like() && r.is_numeric_like()) {
        const double a = l.numeric(), b = r.numeric();
        if (a == 0 && b < 0) error("0.0 cannot be raised to a negative power");
        const double res = std::pow(a, b);
        if (!std::isfinite(res)) error("exponentiation result is not a finite real number");
        const bool fl = l.kind == Kind::Float || r.kind == Kind::Float || b < 0;
        return fl ? Value::floating(res) : Value::integer(res);
    } else if (l.kind == Kind::Array && r.kind == Kind::Array) {
        if (op == "+") {
            check_items(l.arr->size() + r.arr->size());
            tick(l.arr->size() + r.arr->size());
            Array a = *l.arr;
            a.insert(a.end(), r.arr->begin(), r.arr->end());
            return Value::array(std::move(a));
        }
    } else if (r.kind == Kind::Array) {
        if (op == "in" || op == "not in") {
            tick(r.arr->size());
            bool found = false;
            for (const Value& x : *r.arr)
                if (strict_equal(x, l)) {
                    found = true;
                    break;
                }
            return Value::from_bool(op == "in" ? found : !found);
        }
    }
    if ((l.kind == Kind::String || r.kind == Kind::String) && op == "+") {
        if (l.text && r.text) return str_concat(l.str(), r.str());
        return str_concat(l.js_string(), r.js_string());
    }
    if (l.kind == Kind::String && r.kind == Kind::String) {
        const std::string &a = l.str(), &b = r.str();
        if (op == "in" || op == "not in") search_work(b.size());
        if (op == "in") return Value::from_bool(find_text(b, a) != std::string::npos);
        if (op == "not in") return Value::from_bool(find_text(b, a) == std::string::npos);
        // Extension: the reference cannot order strings; Jinja compares them.
        if (op == "<") return Value::from_bool(a < b);
        if (op == ">") return Value::from_bool(a > b);
        if (op == "<=") return Value::from_bool(a <= b);
        if (op == ">=") return Value::from_bool(a >= b);
    }
    if (l.kind == Kind::String && r.kind == Kind::Object) {
        tick(r.obj->items.size() / 16);
        if (op == "in") return Value::from_bool(r.obj->find(l.str()) != nullptr);
        if (op == "not in") return Value::from_bool(r.obj->find(l.str()) == nullptr);
    }
    error("unknown operator \"" + op + "\" between " + l.type_name() + " and " + r.type_name());
}

Value Interpreter::slice(const Value& object, const Ast& n, const std::shared_ptr<Env>& env) {
    if (object.kind != Kind::Array && object.kind != Kind::String)
        error("slice object must be an array or string");
    auto part = [&](const AstPtr& p, const char* what) {
        Value v = p ? eval(*p, env) : Value::undefined();
        if (v.kind != Kind::Int && !v.is_undefined())
            error(std::string("slice ") + what + " must be an integer or undefined");
        return v;
    };
    const Value start = part(n.a, "start"), stop = part(n.b, "stop"), step_v = part(n.c, "step");
    const Text* text = object.kind == Kind::String ? object.text.get() : nullptr;
    const double len = text ? double(text->code_point_count()) : double(object.arr->size());
    const double step = step_v.is_undefined() ? 1 : step_v.num;
    const double dir = step > 0 ? 1 : step < 0 ? -1 : 0;
    double s, e;
    if (dir >= 0) {
        s = start.is_undefined() ? 0 : start.num;
        s = s < 0 ? std::max(len + s, 0.0) : std::min(s, len);
        e = stop.is_undefined() ? len : stop.num;
        e = e < 0 ? std::max(len + e, 0.0) : std::min(e, len);
    } else {
        s = start.is_undefined() ? len - 1 : start.num;
        s = s < 0 ? std::max(len + s, -1.0) : std::min(s, len - 1);
        e = stop.is_undefined() ? -1 : stop.num;
        e = e < -1 ? std::max(len + e, -1.0) : std::min(e, len - 1);
    }
    if (text && step == 1) {  // a plain substring: one copy
        const size_t first = size_t(s), last = size_t(std::max(s, e));
        const auto [b, end] = text->code_point_span(first, last);
        work(end - b);
        check_size(end - b);
        return Value::string(text->bytes.substr(b, end - b));
    }
    Array out;
    std::string str;
    for (double i = s; dir * i < dir * e; i += step) {
        tick();
        if (!text) {
            out.push_back((*object.arr)[size_t(i)]);
        } else {
            const auto [b, end] = text->code_point_span(size_t(i), size_t(i) + 1);
            str.append(text->bytes, b, end - b);
        }
    }
    return text ? Value::string(std::move(str)) : Value::array(std::move(out));
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
    if (a.is_null() && b.is_null()) return 0;
    if (a.is_null() || b.is_null())
        throw std::runtime_error(std::string("cannot compare ") + a.type_name() + " with " +
                                 b.type_name());
    if (a.is_undefined() && b.is_undefined()) return 0;
    if (a.is_undefined() || b.is_undefined())
        throw std::runtime_error(std::string("cannot compare ") + a.type_name() + " with " +
                                 b.type_name());
    if (a.is_numeric_like() && b.is_numeric_like()) {
        const double x = a.numeric(), y = b.numeric();
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.kind != b.kind || a.kind != Kind::String)
        throw std::runtime_error(std::string("cannot compare ") + a.type_name() + " with " +
                                 b.type_name());
    if (case_sensitive) return a.str() < b.str() ? -1 : a.str() > b.str() ? 1 : 0;
    const std::string x = to_lower(a.str()), y = to_lower(b.str());
    return x < y ? -1 : x > y ? 1 : 0;
}

}  // namespace specula::jinja
