// Filters (`value | name(args)`). Those @huggingface/jinja has behave as it does them, per
// operand type: tojson, safe, default/d, join, int, float, length, first, last, reverse, sort,
// unique, list, string, items, keys, values, dictsort, upper, lower, title, capitalize, trim,
// indent, replace, abs, map (attribute=), selectattr, rejectattr. The rest follow Jinja2:
// count, map('filter'), select, reject, round, sum, min, max, batch, wordcount, center, format,
// escape/e, and first/last/list/reverse on strings.
#include <algorithm>
#include <cmath>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/text_ops.h"
#include "chat/jinja/unicode.h"

namespace specula::jinja {

namespace {

const char* const kFilters[] = {
    "safe",   "tojson",     "default",     "d",         "join",    "int",      "float",
    "length", "count",      "first",       "last",      "reverse", "sort",     "unique",
    "list",   "string",     "items",       "keys",      "values",  "dictsort", "upper",
    "lower",  "title",      "capitalize",  "trim",      "indent",  "replace",  "abs",
    "map",    "selectattr", "rejectattr",  "select",    "reject",  "round",    "sum",
    "min",    "max",        "batch",       "wordcount", "center",  "format",   "escape",
    "e",      "bool",       "forceescape",
};

const Value* arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t i, const char* name) {
    if (i < args.size()) return &args[i];
    for (const auto& kv : kwargs)
        if (kv.first == name) return &kv.second;
    return nullptr;
}

// getAttributeValue: a dotted path through objects, namespaces and (numeric parts) arrays.
Value attribute_path(const Value& item, const std::string& path) {
    Value v = item;
    size_t start = 0;
    while (true) {
        const size_t dot = path.find('.', start);
        const std::string part =
            path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (v.is_container()) {
            const Value* x = v.obj->find(part);
            v = x ? *x : Value::undefined();
        } else if (v.kind == Kind::Array) {
            const auto idx = parse_int(part);
            if (idx && *idx >= 0 && *idx < double(v.arr->size()))
                v = (*v.arr)[size_t(*idx)];
            else
                return Value::undefined();
        } else {
            return Value::undefined();
        }
        if (dot == std::string::npos) return v;
        start = dot + 1;
    }
}

std::string join_piece(const Value& v) {
    return v.is_null() || v.is_undefined() ? "" : v.js_string();
}

Value string_list(const std::vector<std::string>& parts) {
    Array a;
    for (const auto& p : parts) a.push_back(Value::string(p));
    return Value::array(std::move(a));
}

}  // namespace

bool Interpreter::has_filter(const std::string& name) const {
    for (const char* f : kFilters)
        if (name == f) return true;
    return false;
}

Value Interpreter::apply_filter(const Value& x, const std::string& name, std::vector<Value>& args,
                                Kwargs& kwargs, bool called, const std::shared_ptr<Env>& env) {
    auto cannot = [&]() -> Value {
        error("cannot apply filter \"" + name + "\" to type: " + x.type_name());
    };
    if (!has_filter(name)) error("unknown filter: " + name);
    if (name == "safe") return x;
    if (name == "tojson") {
        JsonOptions o;
        if (const Value* v = arg({}, kwargs, 0, "indent"); v && !v->is_null()) {
            if (v->kind != Kind::Int) error("if set, indent must be a number");
            o.indent = int(std::clamp(v->num, -1.0, 64.0));
        } else if (!args.empty() && args[0].kind == Kind::Int) {
            o.indent = int(std::clamp(args[0].num, -1.0, 64.0));  // Jinja's positional indent
        }
        if (const Value* v = arg({}, kwargs, 0, "ensure_ascii")) {
            if (v->kind != Kind::Bool) error("if set, ensure_ascii must be a boolean");
            o.ensure_ascii = v->boolean;
        }
        if (const Value* v = arg({}, kwargs, 0, "sort_keys")) {
            if (v->kind != Kind::Bool) error("if set, sort_keys must be a boolean");
            o.sort_keys = v->boolean;
        }
        if (const Value* v = arg({}, kwargs, 0, "separators"); v && !v->is_null()) {
            if (v->kind != Kind::Array || v->arr->size() != 2 ||
                (*v->arr)[0].kind != Kind::String || (*v->arr)[1].kind != Kind::String)
                error("separators must be a tuple of two strings");
            o.has_separators = true;
            o.item_sep = (*v->arr)[0].str;
            o.key_sep = (*v->arr)[1].str;
        }
        if (o.indent < 0) o.indent = 0;
        o.max_len = limits_.max_output;
        std::string s;
        try {
            s = to_json(x, o);
        } catch (const std::runtime_error& e) {
            error(e.what());
        }
        return Value::string(std::move(s));
    }
    if (name == "default" || name == "d") {
        const Value def = args.empty() ? Value::string("") : args[0];
        const Value* b = arg(args, kwargs, 1, "boolean");
        if (b && b->kind != Kind::Bool) error("`default` filter flag must be a boolean");
        if (x.is_undefined() || (b && b->boolean && !x.truthy())) return def;
        return x;
    }
    if (name == "join") {
        const Value* sep = arg(args, kwargs, 0, "separator");
        if (sep && sep->kind != Kind::String) error("separator must be a string");
        const std::string s = sep ? sep->str : "";
        const Value* attr = arg({}, kwargs, 0, "attribute");
        std::string out;
        if (x.kind == Kind::String) {
            if (!called) return x;
            const auto cps = code_points(x.str);
            for (size_t i = 0; i < cps.size(); ++i) out += (i ? s : "") + cps[i];
        } else if (x.kind == Kind::Array) {
            for (size_t i = 0; i < x.arr->size(); ++i) {
                const Value& item = (*x.arr)[i];
                out += (i ? s : "") + join_piece(attr && attr->kind == Kind::String
                                                     ? attribute_path(item, attr->str)
                                                     : item);
                check_size(out.size());
            }
        } else {
            return cannot();
        }
        check_size(out.size());
        return Value::string(std::move(out));
    }
    if (name == "int" || name == "float") {
        const bool is_int = name == "int";
        const Value* dflt = arg(args, kwargs, 0, "default");
        const Value def = dflt ? *dflt : is_int ? Value::integer(0) : Value::floating(0);
        if (x.kind == Kind::String) {
            const auto v = is_int ? parse_int(x.str) : parse_float(x.str);
            if (!v) return def;
            return is_int ? Value::integer(*v) : Value::floating(*v);
        }
        if (x.is_number())
            return is_int ? Value::integer(std::trunc(x.num) + 0.0) : Value::floating(x.num);
        if (x.kind == Kind::Bool)
            return is_int ? Value::integer(x.boolean) : Value::floating(x.boolean);
        return cannot();
    }
    if (name == "length" || name == "count") {
        if (x.kind == Kind::String) return Value::integer(double(utf16_length(x.str)));
        if (x.kind == Kind::Array) return Value::integer(double(x.arr->size()));
        if (x.kind == Kind::Object) return Value::integer(double(x.obj->items.size()));
        return cannot();
    }
    if (name == "string") {
        if (x.kind == Kind::String) return x;
        if (x.is_number()) return Value::string(x.to_output());
        if (x.kind == Kind::Bool) return Value::string(x.boolean ? "true" : "false");
        if (x.kind == Kind::Array || x.is_container()) return Value::string(to_json(x, {}, false));
        return cannot();
    }
    if (name == "bool") {
        if (x.kind == Kind::Bool) return x;
        return cannot();
    }
    if (name == "abs") {
        if (!x.is_number()) return cannot();
        return x.kind == Kind::Int ? Value::integer(std::fabs(x.num))
                                   : Value::floating(std::fabs(x.num));
    }
    if (name == "round") {
        if (!x.is_number()) return cannot();
        const Value* prec = arg(args, kwargs, 0, "precision");
        const Value* method = arg(args, kwargs, 1, "method");
        const double p = prec && prec->is_number() ? prec->num : 0;
        const double scale = std::pow(10.0, p);
        const std::string m = method && method->kind == Kind::String ? method->str : "common";
        double v = x.num * scale;
        v = m == "ceil" ? std::ceil(v) : m == "floor" ? std::floor(v) : std::round(v);
        return Value::floating(v / scale);
    }
    if (x.kind == Kind::Array) {
        const Array& a = *x.arr;
        if (name == "list") return x;
        if (name == "first") return a.empty() ? Value::undefined() : a.front();
        if (name == "last") return a.empty() ? Value::undefined() : a.back();
        if (name == "reverse") return Value::array(Array(a.rbegin(), a.rend()));
        if (name == "unique") {
            Array out;
            for (const Value& item : a) {
                tick(out.size() + 1);
                bool seen = false;
                for (const Value& o : out)
                    if (strict_equal(o, item) || (o.is_number() && item.is_number() &&
                                                  std::isnan(o.num) && std::isnan(item.num))) {
                        seen = true;
                        break;
                    }
                if (!seen) out.push_back(item);
            }
            return Value::array(std::move(out));
        }
        if (name == "sort") {
            const Value* rev = arg(args, kwargs, 0, "reverse");
            const Value* cs = arg(args, kwargs, 1, "case_sensitive");
            const Value* attr = arg(args, kwargs, 2, "attribute");
            if (rev && rev->kind != Kind::Bool) error("reverse must be a boolean");
            if (cs && cs->kind != Kind::Bool) error("case_sensitive must be a boolean");
            if (attr && attr->kind != Kind::String && attr->kind != Kind::Int && !attr->is_null())
                error("attribute must be a string, integer, or null");
            const bool reverse = rev && rev->boolean, case_sensitive = cs && cs->boolean;
            std::string path;
            if (attr && !attr->is_null())
                path = attr->kind == Kind::Int ? js_number(attr->num) : attr->str;
            tick(a.size() * 8);
            Array out = a;
            try {
                std::stable_sort(out.begin(), out.end(), [&](const Value& l, const Value& r) {
                    const Value lv = path.empty() ? l : attribute_path(l, path);
                    const Value rv = path.empty() ? r : attribute_path(r, path);
                    const int c = compare_values(lv, rv, case_sensitive);
                    return reverse ? c > 0 : c < 0;
                });
            } catch (const std::runtime_error& e) {
                error(e.what());
            }
            return Value::array(std::move(out));
        }
        if (name == "selectattr" || name == "rejectattr") {
            const bool select = name == "selectattr";
            for (const Value& item : a)
                if (!item.is_container())
                    error("`" + name + "` can only be applied to array of objects");
            if (args.empty() || args[0].kind != Kind::String)
                error("arguments of `" + name + "` must be strings");
            const std::string attr = args[0].str;
            Array out;
            for (const Value& item : a) {
                tick();
                const Value* v = item.obj->find(attr);
                bool r = false;
                if (v) {
                    if (args.size() > 1) {
                        if (args[1].kind != Kind::String)
                            error("arguments of `" + name + "` must be strings");
                        r = apply_test(args[1].str, *v,
                                       std::vector<Value>(args.begin() + 2, args.end()));
                    } else {
                        r = v->truthy();
                    }
                }
                if (r == select) out.push_back(item);
            }
            return Value::array(std::move(out));
        }
        if (name == "select" || name == "reject") {
            const bool select = name == "select";
            Array out;
            for (const Value& item : a) {
                tick();
                bool r;
                if (args.empty()) {
                    r = item.truthy();
                } else {
                    if (args[0].kind != Kind::String)
                        error("the test of `" + name + "` must be a string");
                    r = apply_test(args[0].str, item,
                                   std::vector<Value>(args.begin() + 1, args.end()));
                }
                if (r == select) out.push_back(item);
            }
            return Value::array(std::move(out));
        }
        if (name == "map") {
            Array out;
            if (const Value* attr = arg({}, kwargs, 0, "attribute")) {
                if (attr->kind != Kind::String) error("attribute must be a string");
                const Value* def = arg({}, kwargs, 0, "default");
                for (const Value& item : a) {
                    tick();
                    if (!item.is_container()) error("items in map must be an object");
                    Value v = attribute_path(item, attr->str);
                    out.push_back(v.is_undefined() && def ? *def : v);
                }
                return Value::array(std::move(out));
            }
            if (args.empty() || args[0].kind != Kind::String)
                error("map needs attribute= or a filter name");
            const std::string filter = args[0].str;
            for (const Value& item : a) {
                std::vector<Value> rest(args.begin() + 1, args.end());
                Kwargs kw = kwargs;
                out.push_back(apply_filter(item, filter, rest, kw, args.size() > 1, env));
            }
            return Value::array(std::move(out));
        }
        if (name == "sum") {
            const Value* attr = arg(args, kwargs, 0, "attribute");
            const Value* start = arg(args, kwargs, 1, "start");
            double total = start && start->is_numeric_like() ? start->numeric() : 0;
            bool fl = start && start->kind == Kind::Float;
            for (const Value& item : a) {
                const Value v =
                    attr && attr->kind == Kind::String ? attribute_path(item, attr->str) : item;
                if (!v.is_numeric_like()) error(std::string("cannot sum ") + v.type_name());
                total += v.numeric();
                fl |= v.kind == Kind::Float;
            }
            return fl ? Value::floating(total) : Value::integer(total);
        }
        if (name == "min" || name == "max") {
            if (a.empty()) return Value::undefined();
            const Value* cs = arg(args, kwargs, 0, "case_sensitive");
            const Value* attr = arg(args, kwargs, 1, "attribute");
            size_t best = 0;
            try {
                for (size_t i = 1; i < a.size(); ++i) {
                    const Value l =
                        attr && attr->kind == Kind::String ? attribute_path(a[i], attr->str) : a[i];
                    const Value r = attr && attr->kind == Kind::String
                                        ? attribute_path(a[best], attr->str)
                                        : a[best];
                    const int c = compare_values(l, r, cs && cs->truthy());
                    if (name == "min" ? c < 0 : c > 0) best = i;
                }
            } catch (const std::runtime_error& e) {
                error(e.what());
            }
            return a[best];
        }
        if (name == "batch") {
            const Value* n = arg(args, kwargs, 0, "linecount");
            if (!n || !n->is_number() || n->num < 1) error("batch needs a positive size");
            const size_t size = size_t(std::min(n->num, 1e9));
            const Value* fill = arg(args, kwargs, 1, "fill_with");
            Array out, cur;
            for (const Value& item : a) {
                cur.push_back(item);
                if (cur.size() == size) out.push_back(Value::array(std::move(cur))), cur.clear();
            }
            if (!cur.empty()) {
                if (fill && !fill->is_null()) {
                    check_items(size);
                    while (cur.size() < size) cur.push_back(*fill);
                }
                out.push_back(Value::array(std::move(cur)));
            }
            return Value::array(std::move(out));
        }
        if (name == "join") return cannot();
        error("unknown ArrayValue filter: " + name);
    }
    if (x.kind == Kind::String) {
        const std::string& s = x.str;
        if (name == "upper") return Value::string(to_upper(s));
        if (name == "lower") return Value::string(to_lower(s));
        if (name == "title") return Value::string(title_case(s));
        if (name == "capitalize") return Value::string(capitalize(s));
        if (name == "trim") return Value::string(trim(s));
        if (name == "escape" || name == "e" || name == "forceescape")
            return Value::string(html_escape(s));
        if (name == "list" || name == "first" || name == "last" || name == "reverse") {
            auto cps = code_points(s);
            if (name == "first")
                return cps.empty() ? Value::undefined() : Value::string(cps.front());
            if (name == "last") return cps.empty() ? Value::undefined() : Value::string(cps.back());
            if (name == "reverse") {
                std::string r;
                for (auto it = cps.rbegin(); it != cps.rend(); ++it) r += *it;
                return Value::string(r);
            }
            return string_list(cps);
        }
        if (name == "wordcount") return Value::integer(double(split_whitespace(s, -1).size()));
        if (name == "indent") {
            const Value* w = arg(args, kwargs, 0, "width");
            if (w && w->kind != Kind::Int && w->kind != Kind::String)
                error("width must be an integer or a string");
            const Value* first = arg(args, kwargs, 1, "first");
            const Value* blank = arg(args, kwargs, 2, "blank");
            const std::string pad = !w ? "    "
                                    : w->kind == Kind::String
                                        ? w->str
                                        : std::string(size_t(std::clamp(w->num, 0.0, 4096.0)), ' ');
            const auto lines = split_on(s, "\n", -1);
            std::string out;
            for (size_t i = 0; i < lines.size(); ++i) {
                if (i) out += '\n';
                const bool keep = (!(first && first->truthy()) && i == 0) ||
                                  (!(blank && blank->truthy()) && lines[i].empty());
                if (!keep) out += pad;
                out += lines[i];
                check_size(out.size());
            }
            return Value::string(std::move(out));
        }
        if (name == "replace") {
            if (args.size() < 2) error("replace() requires at least two arguments");
            if (args[0].kind != Kind::String || args[1].kind != Kind::String)
                error("replace() arguments must be strings");
            const Value* count = arg(args, kwargs, 2, "count");
            if (count && count->kind != Kind::Int && !count->is_null())
                error("replace() count argument must be a number or null");
            const double c = count && count->kind == Kind::Int ? count->num : -1;
            const size_t growth = args[0].str.empty() ? (s.size() + 1) * args[1].str.size()
                                  : args[1].str.size() > args[0].str.size()
                                      ? (s.size() / args[0].str.size() + 1) *
                                            (args[1].str.size() - args[0].str.size())
                                      : 0;
            check_size(s.size() + growth);
            return Value::string(replace_all(s, args[0].str, args[1].str, c < 0 ? -1 : c));
        }
        if (name == "center") {
            const Value* w = arg(args, kwargs, 0, "width");
            const double width = w && w->is_number() ? std::min(w->num, 1e6) : 80;
            const double len = double(utf16_length(s));
            if (len >= width) return x;
            const size_t total = size_t(width - len), left = total / 2;
            return Value::string(std::string(left, ' ') + s + std::string(total - left, ' '));
        }
        if (name == "format") {
            std::string out;
            size_t next = 0;
            for (size_t i = 0; i < s.size(); ++i) {
                if (s[i] != '%' || i + 1 >= s.size()) {
                    out += s[i];
                    continue;
                }
                const char c = s[++i];
                if (c == '%') {
                    out += '%';
                } else if (c == 's' || c == 'd' || c == 'i' || c == 'f') {
                    if (next >= args.size()) error("not enough arguments for format string");
                    const Value& v = args[next++];
                    out += c == 's'   ? v.to_output()
                           : c == 'f' ? float_string(v.numeric())
                                      : js_number(std::trunc(v.numeric()));
                } else {
                    out += '%';
                    out += c;
                }
            }
            return Value::string(out);
        }
        error("unknown StringValue filter: " + name);
    }
    if (x.kind == Kind::Object) {
        if (name == "items" || name == "keys" || name == "values" || name == "dictsort") {
            Value fn = builtin_member(x, name, *this);
            return call(fn, args, kwargs, env);
        }
        if (name == "list") {
            Array keys;
            for (const auto& kv : x.obj->items) keys.push_back(Value::string(kv.first));
            return Value::array(std::move(keys));
        }
        error("unknown ObjectValue filter: " + name);
    }
    return cannot();
}

}  // namespace specula::jinja
