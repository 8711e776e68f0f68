// The names every render starts with, as @huggingface/jinja defines them: true/false/none (and
// True/False/None), raise_exception(msg), range(start, stop, step), strftime_now(format) (local
// time; %Y %m %d %b %B %H %M %%, other directives kept as written) and namespace(...); plus
// dict(...) from Jinja2.
#include <cmath>
#include <ctime>

#include "chat/jinja/interpreter.h"

namespace specula::jinja {

namespace {

Value namespace_builtin(std::vector<Value>& args, Kwargs& kwargs, Interpreter& in,
                        const std::shared_ptr<Env>&) {
    if (args.size() > 1)
        in.error("namespace expected at most 1 argument, got " + std::to_string(args.size()));
    Value ns = Value::namespace_();
    if (args.size() == 1) {
        const Value& src = args[0];
        if (src.kind == Kind::Object) {
            for (const auto& kv : src.obj->items) ns.obj->set(kv.first, kv.second);
        } else if (src.kind == Kind::Array) {
            for (const Value& pair : *src.arr) {
                if (pair.kind != Kind::Array || pair.arr->size() != 2)
                    in.error("namespace expected an object or an iterable of [key, value] pairs");
                if ((*pair.arr)[0].kind != Kind::String) in.error("namespace keys must be strings");
                ns.obj->set((*pair.arr)[0].str(), (*pair.arr)[1]);
            }
        } else {
            in.error(std::string("'") + src.type_name() + "' object is not iterable");
        }
    }
    for (const auto& kv : kwargs) ns.obj->set(kv.first, kv.second);
    return ns;
}

Value range_builtin(std::vector<Value>& args, Kwargs&, Interpreter& in,
                    const std::shared_ptr<Env>&) {
    if (args.empty() || args.size() > 3) in.error("range expected 1 to 3 arguments");
    for (const Value& a : args)
        if (!a.is_numeric_like())
            in.error(std::string("range() arguments must be numbers, got ") + a.type_name());
    double start = 0, stop, step = 1;
    if (args.size() == 1) {
        stop = args[0].numeric();
    } else {
        start = args[0].numeric();
        stop = args[1].numeric();
        if (args.size() == 3) step = args[2].numeric();
    }
    if (step == 0) in.error("range() step must not be zero");
    // Bounded by the count, not by the values: past 2^53 `i += 1` leaves a double unchanged
    // (range(2**54, 2**54 + 8) would never end). Integers step as start + k * step; floats add
    // up as the reference's loop does (the same values, 0.1 + 0.1 + 0.1 included).
    const double n = std::ceil((stop - start) / step);
    const double count = n > 0 ? n : 0;  // NaN: none
    if (count > double(in.limits().max_items))
        in.error("range() of " + js_number(count) + " items: longer than the limit of " +
                 std::to_string(in.limits().max_items) + " items of a list");
    const size_t limit = size_t(count) + 1;
    bool integers = true;
    for (const Value& a : args) integers &= a.kind != Kind::Float;
    in.tick(limit);
    Array out;
    out.reserve(limit);
    double i = start;
    for (size_t k = 0; k < limit && (step > 0 ? i < stop : i > stop); ++k) {
        out.push_back(Value::integer(i));
        i = integers ? start + double(k + 1) * step : i + step;
    }
    return Value::array(std::move(out));
}

Value strftime_now(std::vector<Value>& args, Kwargs&, Interpreter& in,
                   const std::shared_ptr<Env>&) {
    if (args.empty() || args[0].kind != Kind::String)
        in.error("strftime_now() needs a format string");
    static const char* const kLong[] = {"January",   "February", "March",    "April",
                                        "May",       "June",     "July",     "August",
                                        "September", "October",  "November", "December"};
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    auto pad2 = [](int n) { return (n < 10 ? "0" : "") + std::to_string(n); };
    const std::string& f = args[0].str();
    std::string out;
    for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] != '%' || i + 1 >= f.size()) {
            out += f[i];
            continue;
        }
        const char c = f[i + 1];
        switch (c) {
            case 'Y':
                out += std::to_string(tm.tm_year + 1900);
                break;
            case 'm':
                out += pad2(tm.tm_mon + 1);
                break;
            case 'd':
                out += pad2(tm.tm_mday);
                break;
            case 'b':
                out += std::string(kLong[tm.tm_mon]).substr(0, 3);
                break;
            case 'B':
                out += kLong[tm.tm_mon];
                break;
            case 'H':
                out += pad2(tm.tm_hour);
                break;
            case 'M':
                out += pad2(tm.tm_min);
                break;
            case '%':
                out += '%';
                break;
            default:
                out += f[i];
                continue;
        }
        ++i;
    }
    return Value::string(out);
}

}  // namespace

std::vector<std::pair<std::string, Value>> global_values() {
    std::vector<std::pair<std::string, Value>> g;
    g.emplace_back("namespace", Value::function(namespace_builtin));
    g.emplace_back("false", Value::from_bool(false));
    g.emplace_back("true", Value::from_bool(true));
    g.emplace_back("none", Value::null());
    g.emplace_back("raise_exception",
                   Value::function([](std::vector<Value>& args, Kwargs&, Interpreter&,
                                      const std::shared_ptr<Env>&) -> Value {
                       throw TemplateRaised{Value::array(args).js_string()};
                   }));
    g.emplace_back("range", Value::function(range_builtin));
    g.emplace_back("strftime_now", Value::function(strftime_now));
    g.emplace_back("True", Value::from_bool(true));
    g.emplace_back("False", Value::from_bool(false));
    g.emplace_back("None", Value::null());
    g.emplace_back("dict", Value::function([](std::vector<Value>& args, Kwargs& kwargs,
                                              Interpreter& in, const std::shared_ptr<Env>&) {
                       Value d = Value::object();
                       if (!args.empty()) {
                           if (args[0].kind != Kind::Object) in.error("dict() takes a mapping");
                           in.charge(args[0].obj->items.size() * sizeof(d.obj->items[0]));
                           d.obj->items = args[0].obj->items;
                       }
                       for (const auto& kv : kwargs) d.obj->set(kv.first, kv.second);
                       return d;
                   }));
    return g;
}

}  // namespace specula::jinja
