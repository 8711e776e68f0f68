// Filters (`value | name(args)`). Those @huggingface/jinja has behave as it does them, per
// operand type: tojson, safe, default/d, join, int, float, length, first, last, reverse, sort,
// unique, list, string, items, keys, values, dictsort, upper, lower, title, capitalize, trim,
// indent, replace, abs, map (attribute=), selectattr, rejectattr. The rest follow Jinja2:
// count, map('filter'), select, reject, round, sum, min, max, batch, wordcount, center, format,
// escape/e, and first/last/list/reverse on strings.
//
// One table, kFilters: a filter's name -> its function for any operand, or its functions per
// operand type (list, string, object); a known filter without one for the operand's type is an
// error naming the type, as the reference's.
#include <algorithm>
#include <cmath>

#include "chat/jinja/filter_call.h"
#include "chat/jinja/text_ops.h"
#include "chat/jinja/unicode.h"

namespace specula::jinja {

using namespace filters;

namespace {

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

// Filters for any operand.

Value f_safe(const FilterCall& c) {
    return c.x;
}

Value f_tojson(const FilterCall& c) {
    Interpreter& in = c.in;
    const Kwargs& kwargs = c.kwargs;
    JsonOptions o;
    if (const Value* v = arg({}, kwargs, 0, "indent"); v && !v->is_null()) {
        if (v->kind != Kind::Int) in.error("if set, indent must be a number");
        o.indent = int(std::clamp(v->num, -1.0, 64.0));
    } else if (!c.args.empty() && c.args[0].kind == Kind::Int) {
        o.indent = int(std::clamp(c.args[0].num, -1.0, 64.0));  // Jinja's positional indent
    }
    if (const Value* v = arg({}, kwargs, 0, "ensure_ascii")) {
        if (v->kind != Kind::Bool) in.error("if set, ensure_ascii must be a boolean");
        o.ensure_ascii = v->boolean;
    }
    if (const Value* v = arg({}, kwargs, 0, "sort_keys")) {
        if (v->kind != Kind::Bool) in.error("if set, sort_keys must be a boolean");
        o.sort_keys = v->boolean;
    }
    if (const Value* v = arg({}, kwargs, 0, "separators"); v && !v->is_null()) {
        if (v->kind != Kind::Array || v->arr->size() != 2 || (*v->arr)[0].kind != Kind::String ||
            (*v->arr)[1].kind != Kind::String)
            in.error("separators must be a tuple of two strings");
        o.has_separators = true;
        o.item_sep = (*v->arr)[0].str();
        o.key_sep = (*v->arr)[1].str();
    }
    if (o.indent < 0) o.indent = 0;
    o.max_len = in.limits().max_output;
    o.max_depth = in.limits().max_value_depth;
    std::string s;
    try {
        s = to_json(c.x, o);
    } catch (const std::runtime_error& e) {
        in.error(e.what());
    }
    return Value::string(std::move(s));
}

Value f_default(const FilterCall& c) {
    const Value def = c.args.empty() ? Value::string("") : c.args[0];
    const Value* b = arg(c.args, c.kwargs, 1, "boolean");
    if (b && b->kind != Kind::Bool) c.in.error("`default` filter flag must be a boolean");
    if (c.x.is_undefined() || (b && b->boolean && !c.x.truthy())) return def;
    return c.x;
}

Value f_join(const FilterCall& c) {
    const Value& x = c.x;
    const Value* sep = arg(c.args, c.kwargs, 0, "separator");
    if (sep && sep->kind != Kind::String) c.in.error("separator must be a string");
    const std::string s = sep ? sep->str() : "";
    const Value* attr = arg({}, c.kwargs, 0, "attribute");
    std::string out;
    if (x.kind == Kind::String) {
        if (!c.called) return x;
        const Text& t = *x.text;
        const size_t n = t.code_point_count();
        c.in.check_size(t.bytes.size() + (n ? n - 1 : 0) * s.size());
        for (size_t i = 0; i < n; ++i) {
            const auto [b, e] = t.code_point_span(i, i + 1);
            if (i) out += s;
            out.append(t.bytes, b, e - b);
        }
    } else if (x.kind == Kind::Array) {
        c.in.tick(x.arr->size());
        for (size_t i = 0; i < x.arr->size(); ++i) {
            const Value& item = (*x.arr)[i];
            out += (i ? s : "") + join_piece(attr && attr->kind == Kind::String
                                                 ? attribute_path(item, attr->str())
                                                 : item);
            c.in.check_size(out.size());
        }
    } else {
        c.cannot();
    }
    c.in.check_size(out.size());
    return Value::string(std::move(out));
}

// int and float.
Value f_number(const FilterCall& c) {
    const Value& x = c.x;
    const bool is_int = c.name == "int";
    const Value* dflt = arg(c.args, c.kwargs, 0, "default");
    const Value def = dflt ? *dflt : is_int ? Value::integer(0) : Value::floating(0);
    if (x.kind == Kind::String) {
        const auto v = is_int ? parse_int(x.str()) : parse_float(x.str());
        if (!v) return def;
        return is_int ? Value::integer(*v) : Value::floating(*v);
    }
    if (x.is_number())
        return is_int ? Value::integer(std::trunc(x.num) + 0.0) : Value::floating(x.num);
    if (x.kind == Kind::Bool)
        return is_int ? Value::integer(x.boolean) : Value::floating(x.boolean);
    c.cannot();
}

Value f_length(const FilterCall& c) {
    const Value& x = c.x;
    if (x.kind == Kind::String) return Value::integer(double(utf16_length(x.str())));
    if (x.kind == Kind::Array) return Value::integer(double(x.arr->size()));
    if (x.kind == Kind::Object) return Value::integer(double(x.obj->items.size()));
    c.cannot();
}

Value f_string(const FilterCall& c) {
    const Value& x = c.x;
    if (x.kind == Kind::String) return x;
    if (x.is_number()) return Value::string(x.to_output());
    if (x.kind == Kind::Bool) return Value::string(x.boolean ? "true" : "false");
    if (x.kind == Kind::Array || x.is_container()) {
        JsonOptions o;
        o.max_len = c.in.limits().max_output;
        o.max_depth = c.in.limits().max_value_depth;
        try {
            return Value::string(to_json(x, o, false));
        } catch (const std::runtime_error& e) {
            c.in.error(e.what());
        }
    }
    c.cannot();
}

Value f_bool(const FilterCall& c) {
    if (c.x.kind == Kind::Bool) return c.x;
    c.cannot();
}

Value f_abs(const FilterCall& c) {
    const Value& x = c.x;
    if (!x.is_number()) c.cannot();
    return x.kind == Kind::Int ? Value::integer(std::fabs(x.num))
                               : Value::floating(std::fabs(x.num));
}

Value f_round(const FilterCall& c) {
    if (!c.x.is_number()) c.cannot();
    const Value* prec = arg(c.args, c.kwargs, 0, "precision");
    const Value* method = arg(c.args, c.kwargs, 1, "method");
    const double p = prec && prec->is_number() ? prec->num : 0;
    const double scale = std::pow(10.0, p);
    const std::string m = method && method->kind == Kind::String ? method->str() : "common";
    double v = c.x.num * scale;
    v = m == "ceil" ? std::ceil(v) : m == "floor" ? std::floor(v) : std::round(v);
    return Value::floating(v / scale);
}

// Filters on lists.

Value l_list(const FilterCall& c) {
    return c.x;
}

Value l_first(const FilterCall& c) {
    const Array& a = *c.x.arr;
    return a.empty() ? Value::undefined() : a.front();
}

Value l_last(const FilterCall& c) {
    const Array& a = *c.x.arr;
    return a.empty() ? Value::undefined() : a.back();
}

Value l_reverse(const FilterCall& c) {
    const Array& a = *c.x.arr;
    c.in.tick(a.size());
    return Value::array(Array(a.rbegin(), a.rend()));
}

Value l_unique(const FilterCall& c) {
    Array out;
    for (const Value& item : *c.x.arr) {
        c.in.tick(out.size() + 1);
        bool seen = false;
        for (const Value& o : out)
            if (strict_equal(o, item) ||
                (o.is_number() && item.is_number() && std::isnan(o.num) && std::isnan(item.num))) {
                seen = true;
                break;
            }
        if (!seen) out.push_back(item);
    }
    return Value::array(std::move(out));
}

Value l_sort(const FilterCall& c) {
    Interpreter& in = c.in;
    const Array& a = *c.x.arr;
    const Value* rev = arg(c.args, c.kwargs, 0, "reverse");
    const Value* cs = arg(c.args, c.kwargs, 1, "case_sensitive");
    const Value* attr = arg(c.args, c.kwargs, 2, "attribute");
    if (rev && rev->kind != Kind::Bool) in.error("reverse must be a boolean");
    if (cs && cs->kind != Kind::Bool) in.error("case_sensitive must be a boolean");
    if (attr && attr->kind != Kind::String && attr->kind != Kind::Int && !attr->is_null())
        in.error("attribute must be a string, integer, or null");
    const bool reverse = rev && rev->boolean, case_sensitive = cs && cs->boolean;
    std::string path;
    if (attr && !attr->is_null())
        path = attr->kind == Kind::Int ? js_number(attr->num) : attr->str();
    in.tick(a.size() * 8);
    Array out = a;
    try {
        std::stable_sort(out.begin(), out.end(), [&](const Value& l, const Value& r) {
            const Value lv = path.empty() ? l : attribute_path(l, path);
            const Value rv = path.empty() ? r : attribute_path(r, path);
            const int cmp = compare_values(lv, rv, case_sensitive);
            return reverse ? cmp > 0 : cmp < 0;
        });
    } catch (const std::runtime_error& e) {
        in.error(e.what());
    }
    return Value::array(std::move(out));
}

// selectattr and rejectattr.
Value l_selectattr(const FilterCall& c) {
    Interpreter& in = c.in;
    const std::vector<Value>& args = c.args;
    const bool select = c.name == "selectattr";
    for (const Value& item : *c.x.arr)
        if (!item.is_container())
            in.error("`" + c.name + "` can only be applied to array of objects");
    if (args.empty() || args[0].kind != Kind::String)
        in.error("arguments of `" + c.name + "` must be strings");
    const std::string attr = args[0].str();
    Array out;
    for (const Value& item : *c.x.arr) {
        in.tick();
        const Value* v = item.obj->find(attr);
        bool r = false;
        if (v) {
            if (args.size() > 1) {
                if (args[1].kind != Kind::String)
                    in.error("arguments of `" + c.name + "` must be strings");
                r = in.apply_test(args[1].str(), *v,
                                  std::vector<Value>(args.begin() + 2, args.end()));
            } else {
                r = v->truthy();
            }
        }
        if (r == select) out.push_back(item);
    }
    return Value::array(std::move(out));
}

// select and reject.
Value l_select(const FilterCall& c) {
    const std::vector<Value>& args = c.args;
    const bool select = c.name == "select";
    Array out;
    for (const Value& item : *c.x.arr) {
        c.in.tick();
        bool r;
        if (args.empty()) {
            r = item.truthy();
        } else {
            if (args[0].kind != Kind::String)
                c.in.error("the test of `" + c.name + "` must be a string");
            r = c.in.apply_test(args[0].str(), item,
                                std::vector<Value>(args.begin() + 1, args.end()));
        }
        if (r == select) out.push_back(item);
    }
    return Value::array(std::move(out));
}

Value l_map(const FilterCall& c) {
    Interpreter& in = c.in;
    const std::vector<Value>& args = c.args;
    Array out;
    if (const Value* attr = arg({}, c.kwargs, 0, "attribute")) {
        if (attr->kind != Kind::String) in.error("attribute must be a string");
        const Value* def = arg({}, c.kwargs, 0, "default");
        for (const Value& item : *c.x.arr) {
            in.tick();
            if (!item.is_container()) in.error("items in map must be an object");
            Value v = attribute_path(item, attr->str());
            out.push_back(v.is_undefined() && def ? *def : v);
        }
        return Value::array(std::move(out));
    }
    if (args.empty() || args[0].kind != Kind::String)
        in.error("map needs attribute= or a filter name");
    const std::string filter = args[0].str();
    for (const Value& item : *c.x.arr) {
        std::vector<Value> rest(args.begin() + 1, args.end());
        Kwargs kw = c.kwargs;
        out.push_back(in.apply_filter(item, filter, rest, kw, args.size() > 1, c.env));
    }
    return Value::array(std::move(out));
}

Value l_sum(const FilterCall& c) {
    const Value* attr = arg(c.args, c.kwargs, 0, "attribute");
    const Value* start = arg(c.args, c.kwargs, 1, "start");
    double total = start && start->is_numeric_like() ? start->numeric() : 0;
    bool fl = start && start->kind == Kind::Float;
    c.in.tick(c.x.arr->size());
    for (const Value& item : *c.x.arr) {
        const Value v =
            attr && attr->kind == Kind::String ? attribute_path(item, attr->str()) : item;
        if (!v.is_numeric_like()) c.in.error(std::string("cannot sum ") + v.type_name());
        total += v.numeric();
        fl |= v.kind == Kind::Float;
    }
    return fl ? Value::floating(total) : Value::integer(total);
}

// min and max.
Value l_min(const FilterCall& c) {
    const Array& a = *c.x.arr;
    if (a.empty()) return Value::undefined();
    const Value* cs = arg(c.args, c.kwargs, 0, "case_sensitive");
    const Value* attr = arg(c.args, c.kwargs, 1, "attribute");
    c.in.tick(a.size());
    size_t best = 0;
    try {
        for (size_t i = 1; i < a.size(); ++i) {
            const Value l =
                attr && attr->kind == Kind::String ? attribute_path(a[i], attr->str()) : a[i];
            const Value r =
                attr && attr->kind == Kind::String ? attribute_path(a[best], attr->str()) : a[best];
            const int cmp = compare_values(l, r, cs && cs->truthy());
            if (c.name == "min" ? cmp < 0 : cmp > 0) best = i;
        }
    } catch (const std::runtime_error& e) {
        c.in.error(e.what());
    }
    return a[best];
}

Value l_batch(const FilterCall& c) {
    const Value* n = arg(c.args, c.kwargs, 0, "linecount");
    if (!n || !n->is_number() || n->num < 1) c.in.error("batch needs a positive size");
    const size_t size = size_t(std::min(n->num, 1e9));
    const Value* fill = arg(c.args, c.kwargs, 1, "fill_with");
    c.in.tick(c.x.arr->size());
    Array out, cur;
    for (const Value& item : *c.x.arr) {
        cur.push_back(item);
        if (cur.size() == size) out.push_back(Value::array(std::move(cur))), cur.clear();
    }
    if (!cur.empty()) {
        if (fill && !fill->is_null()) {
            c.in.check_items(size);
            while (cur.size() < size) cur.push_back(*fill);
        }
        out.push_back(Value::array(std::move(cur)));
    }
    return Value::array(std::move(out));
}

// A filter: its function for any operand, or per operand type (null: not for that type).
struct FilterRow {
    const char* name;
    FilterFn any = nullptr, list = nullptr, string = nullptr, object = nullptr;
};

constexpr FilterRow kFilters[] = {
    {"safe", f_safe},
    {"tojson", f_tojson},
    {"default", f_default},
    {"d", f_default},
    {"join", f_join},
    {"int", f_number},
    {"float", f_number},
    {"length", f_length},
    {"count", f_length},
    {"first", nullptr, l_first, s_code_points},
    {"last", nullptr, l_last, s_code_points},
    {"reverse", nullptr, l_reverse, s_code_points},
    {"sort", nullptr, l_sort},
    {"unique", nullptr, l_unique},
    {"list", nullptr, l_list, s_code_points, o_list},
    {"string", f_string},
    {"items", nullptr, nullptr, nullptr, o_method},
    {"keys", nullptr, nullptr, nullptr, o_method},
    {"values", nullptr, nullptr, nullptr, o_method},
    {"dictsort", nullptr, nullptr, nullptr, o_method},
    {"upper", nullptr, nullptr, s_upper},
    {"lower", nullptr, nullptr, s_lower},
    {"title", nullptr, nullptr, s_title},
    {"capitalize", nullptr, nullptr, s_capitalize},
    {"trim", nullptr, nullptr, s_trim},
    {"indent", nullptr, nullptr, s_indent},
    {"replace", nullptr, nullptr, s_replace},
    {"abs", f_abs},
    {"map", nullptr, l_map},
    {"selectattr", nullptr, l_selectattr},
    {"rejectattr", nullptr, l_selectattr},
    {"select", nullptr, l_select},
    {"reject", nullptr, l_select},
    {"round", f_round},
    {"sum", nullptr, l_sum},
    {"min", nullptr, l_min},
    {"max", nullptr, l_min},
    {"batch", nullptr, l_batch},
    {"wordcount", nullptr, nullptr, s_wordcount},
    {"center", nullptr, nullptr, s_center},
    {"format", nullptr, nullptr, s_format},
    {"escape", nullptr, nullptr, s_escape},
    {"e", nullptr, nullptr, s_escape},
    {"forceescape", nullptr, nullptr, s_escape},
    {"bool", f_bool},
};

const FilterRow* find_filter(const std::string& name) {
    for (const FilterRow& row : kFilters)
        if (name == row.name) return &row;
    return nullptr;
}

}  // namespace

bool Interpreter::has_filter(const std::string& name) const {
    return find_filter(name) != nullptr;
}

Value Interpreter::apply_filter(const Value& x, const std::string& name, std::vector<Value>& args,
                                Kwargs& kwargs, bool called, const std::shared_ptr<Env>& env) {
    const FilterRow* row = find_filter(name);
    if (!row) error("unknown filter: " + name);
    const FilterCall c{*this, x, name, args, kwargs, called, env};
    if (x.text) work(x.str().size());  // every string filter walks its operand
    if (row->any) return row->any(c);
    // The reference's errors for a known filter on a type it has no such filter for.
    if (x.kind == Kind::Array) {
        if (!row->list) error("unknown ArrayValue filter: " + name);
        return row->list(c);
    }
    if (x.kind == Kind::String) {
        if (!row->string) error("unknown StringValue filter: " + name);
        return row->string(c);
    }
    if (x.kind == Kind::Object) {
        if (!row->object) error("unknown ObjectValue filter: " + name);
        return row->object(c);
    }
    c.cannot();
}

}  // namespace specula::jinja
